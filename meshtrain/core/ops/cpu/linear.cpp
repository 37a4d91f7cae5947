// Linear layer in GPT-2's Conv1D layout (weight [in, out]): one GEMM each way plus the bias. f32
// runs on OpenBLAS, bf16 on oneDNN (fp32 accumulation, the bias fused into the forward GEMM).
#include <algorithm>
#include <type_traits>

#include "meshtrain/core/ops/cpu/blas.h"
#include "meshtrain/core/ops/cpu/cpu_ops.h"
#include "meshtrain/core/ops/cpu/parallel.h"
#include "meshtrain/core/ops/cpu/simd.h"

namespace meshtrain::ops::cpu {

namespace {
int64_t rows_of(const Tensor& in, int64_t in_features) {
  return in.numel() / std::max<int64_t>(in_features, 1);
}

// d_bias[c0, c1) += column sums of d_out [rows, cols] over those columns, in f32, row by row (so
// any split of the columns gives the same sums), rounded once into d_bias.
template <typename T>
MT_INLINE void add_column_sums(T* d_bias, const T* d_out, int64_t rows, int64_t cols, int64_t c0,
                               int64_t c1) {
  float* sums = thread_scratch<float>(static_cast<size_t>(c1 - c0));
  for (int64_t o = c0; o < c1; ++o) sums[o - c0] = load(d_bias[o]);
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = d_out + r * cols;
    for (int64_t o = c0; o < c1; ++o) sums[o - c0] += load(row[o]);
  }
  for (int64_t o = c0; o < c1; ++o) store(d_bias[o], sums[o - c0]);
}
MT_CLONES void column_sums_f32(float* d_bias, const float* d_out, int64_t rows, int64_t cols,
                               int64_t c0, int64_t c1) {
  add_column_sums(d_bias, d_out, rows, cols, c0, c1);
}
MT_CLONES void column_sums_bf16(BF16* d_bias, const BF16* d_out, int64_t rows, int64_t cols,
                                int64_t c0, int64_t c1) {
  add_column_sums(d_bias, d_out, rows, cols, c0, c1);
}

// Columns split across the threads; each thread sweeps all rows of its columns.
template <typename T>
void add_bias_grad(T* d_bias, const T* d_out, int64_t rows, int64_t cols) {
  parallel_for(cols, 64, [&](int64_t c0, int64_t c1) {
    if constexpr (std::is_same_v<T, float>)
      column_sums_f32(d_bias, d_out, rows, cols, c0, c1);
    else
      column_sums_bf16(d_bias, d_out, rows, cols, c0, c1);
  });
}
}  // namespace

void linear_forward(const Tensor& out, const Tensor& in, const Tensor& weight, const Tensor& bias) {
  const int64_t in_features = weight.dim(0), out_features = weight.dim(1);
  const int64_t rows = rows_of(in, in_features);
  if (in.dtype() == DType::bf16) {
    bf16_gemm(false, false, rows, out_features, in_features, 1.0f, in.data<BF16>(), in_features,
              weight.data<BF16>(), out_features, 0.0f, out.data<BF16>(), DType::bf16,
              out_features, bias.defined() ? bias.data<BF16>() : nullptr);
    return;
  }
  float* y = out.data<float>();
  // Seeding the output with the bias lets the GEMM add onto it (beta = 1) in the same pass that
  // would otherwise zero it, so the bias costs no extra sweep over the output.
  if (bias.defined()) {
    const float* b = bias.data<float>();
    parallel_for(rows, 16, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) std::copy(b, b + out_features, y + r * out_features);
    });
  }
  sgemm(false, false, rows, out_features, in_features, 1.0f, in.data<float>(), in_features,
        weight.data<float>(), out_features, bias.defined() ? 1.0f : 0.0f, y, out_features);
}

void linear_backward(const Tensor& d_in, const Tensor& d_weight, const Tensor& d_bias,
                     const Tensor& d_out, const Tensor& in, const Tensor& weight) {
  const int64_t in_features = weight.dim(0), out_features = weight.dim(1);
  const int64_t rows = rows_of(in, in_features);
  if (in.dtype() == DType::bf16) {
    const BF16* dy = d_out.data<BF16>();
    if (d_in.defined())
      bf16_gemm(false, true, rows, in_features, out_features, 1.0f, dy, out_features,
                weight.data<BF16>(), out_features, 0.0f, d_in.data<BF16>(), DType::bf16,
                in_features);
    if (d_weight.defined())
      bf16_gemm(true, false, in_features, out_features, rows, 1.0f, in.data<BF16>(), in_features,
                dy, out_features, 1.0f, d_weight.data<BF16>(), DType::bf16, out_features);
    if (d_bias.defined()) add_bias_grad(d_bias.data<BF16>(), dy, rows, out_features);
    return;
  }
  const float* dy = d_out.data<float>();
  if (d_in.defined())
    sgemm(false, true, rows, in_features, out_features, 1.0f, dy, out_features,
          weight.data<float>(), out_features, 0.0f, d_in.data<float>(), in_features);
  if (d_weight.defined())
    sgemm(true, false, in_features, out_features, rows, 1.0f, in.data<float>(), in_features, dy,
          out_features, 1.0f, d_weight.data<float>(), out_features);
  if (d_bias.defined()) add_bias_grad(d_bias.data<float>(), dy, rows, out_features);
}

}  // namespace meshtrain::ops::cpu
