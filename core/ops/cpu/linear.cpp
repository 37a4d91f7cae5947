// Linear layer in GPT-2's Conv1D layout (weight [in, out]): one GEMM each way plus the bias.
#include <algorithm>

#include "core/ops/cpu/blas.h"
#include "core/ops/cpu/cpu_ops.h"

namespace meshtrain::ops::cpu {

void linear_forward(const Tensor& out, const Tensor& in, const Tensor& weight, const Tensor& bias) {
  const int64_t in_features = weight.dim(0), out_features = weight.dim(1);
  const int64_t rows = in.numel() / std::max<int64_t>(in_features, 1);
  float* y = out.data<float>();
  // Seeding the output with the bias lets the GEMM add onto it (beta = 1) in the same pass that
  // would otherwise zero it, so the bias costs no extra sweep over the output.
  if (bias.defined()) {
    const float* b = bias.data<float>();
    for (int64_t r = 0; r < rows; ++r) std::copy(b, b + out_features, y + r * out_features);
  }
  sgemm(false, false, rows, out_features, in_features, 1.0f, in.data<float>(), in_features,
        weight.data<float>(), out_features, bias.defined() ? 1.0f : 0.0f, y, out_features);
}

void linear_backward(const Tensor& d_in, const Tensor& d_weight, const Tensor& d_bias,
                     const Tensor& d_out, const Tensor& in, const Tensor& weight) {
  const int64_t in_features = weight.dim(0), out_features = weight.dim(1);
  const int64_t rows = in.numel() / std::max<int64_t>(in_features, 1);
  const float* dy = d_out.data<float>();
  if (d_in.defined())
    sgemm(false, true, rows, in_features, out_features, 1.0f, dy, out_features,
          weight.data<float>(), out_features, 0.0f, d_in.data<float>(), in_features);
  if (d_weight.defined())
    sgemm(true, false, in_features, out_features, rows, 1.0f, in.data<float>(), in_features, dy,
          out_features, 1.0f, d_weight.data<float>(), out_features);
  if (d_bias.defined()) {
    float* db = d_bias.data<float>();
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = dy + r * out_features;
      for (int64_t o = 0; o < out_features; ++o) db[o] += row[o];
    }
  }
}

}  // namespace meshtrain::ops::cpu
