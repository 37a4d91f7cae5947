// matmul and the GPT-2 linear layer (weight [in, out]) on cuBLAS, forward and backward.
#include "meshtrain/core/ops/cuda/cuda_ops.h"
#include "meshtrain/core/ops/cuda/gemm.h"
#include "meshtrain/core/ops/cuda/kernel_utils.cuh"

namespace meshtrain::ops::cuda {

namespace {

// The whole row-major tensor as one matrix with `cols` columns.
GemmMatrix matrix(const Tensor& t, int64_t cols) {
  return {t.numel() ? t.raw_data() : nullptr, t.dtype(), cols};
}

// out[r, c] = bias[c]: the starting value of a GEMM that then adds in @ weight with beta = 1,
// so that bf16 outputs are rounded once.
template <typename T>
struct BroadcastRows {
  T* out;
  const T* bias;
  int64_t cols;
  __device__ void operator()(int64_t i) const { out[i] = bias[i % cols]; }
};

}  // namespace

void matmul(const Tensor& out, const Tensor& a, const Tensor& b, bool trans_a, bool trans_b,
            float alpha, float beta) {
  use_device(out);
  const int64_t m = out.dim(0), n = out.dim(1), k = trans_a ? a.dim(0) : a.dim(1);
  gemm(m, n, k, trans_a, trans_b, alpha, matrix(a, a.dim(1)), matrix(b, b.dim(1)), beta,
       matrix(out, n));
}

void linear_forward(const Tensor& out, const Tensor& in, const Tensor& weight, const Tensor& bias) {
  use_device(out);
  const int64_t rows = leading_rows(in), in_features = weight.dim(0), out_features = weight.dim(1);
  float beta = 0.0f;
  if (bias.defined()) {
    dispatch_float(out.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      launch_elementwise(rows * out_features,
                         BroadcastRows<T>{ptr<T>(out), ptr<T>(bias), out_features});
    });
    beta = 1.0f;
  }
  gemm(rows, out_features, in_features, false, false, 1.0f, matrix(in, in_features),
       matrix(weight, out_features), beta, matrix(out, out_features));
}

void linear_backward(const Tensor& d_in, const Tensor& d_weight, const Tensor& d_bias,
                     const Tensor& d_out, const Tensor& in, const Tensor& weight) {
  use_device(d_out);
  const int64_t rows = leading_rows(in), in_features = weight.dim(0), out_features = weight.dim(1);
  if (d_in.defined())  // d_in = d_out @ weight^T
    gemm(rows, in_features, out_features, false, true, 1.0f, matrix(d_out, out_features),
         matrix(weight, out_features), 0.0f, matrix(d_in, in_features));
  if (d_weight.defined())  // d_weight += in^T @ d_out
    gemm(in_features, out_features, rows, true, false, 1.0f, matrix(in, in_features),
         matrix(d_out, out_features), 1.0f, matrix(d_weight, out_features));
  if (d_bias.defined()) {
    dispatch_float(d_out.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      accumulate_column_sums<T>(d_bias, rows, out_features,
                                MatrixValues<T>{ptr<T>(d_out), out_features});
    });
  }
}

}  // namespace meshtrain::ops::cuda
