// GELU with the tanh approximation used by GPT-2, its tanh vectorised (fast_tanh.h).
#include "core/ops/cpu/cpu_ops.h"
#include "core/ops/cpu/fast_tanh.h"

namespace meshtrain::ops::cpu {

namespace {
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;
}  // namespace

void gelu_forward(const Tensor& out, const Tensor& in) {
  const float* x = in.data<float>();
  float* y = out.data<float>();
  for (int64_t i = 0; i < in.numel(); ++i) {
    const float u = kSqrt2OverPi * (x[i] + kCubic * x[i] * x[i] * x[i]);
    y[i] = 0.5f * x[i] * (1.0f + fast_tanh(u));
  }
}

void gelu_backward(const Tensor& d_in, const Tensor& d_out, const Tensor& in) {
  const float* x = in.data<float>();
  const float* dy = d_out.data<float>();
  float* dx = d_in.data<float>();
  for (int64_t i = 0; i < in.numel(); ++i) {
    const float u = kSqrt2OverPi * (x[i] + kCubic * x[i] * x[i] * x[i]);
    const float t = fast_tanh(u);
    const float du = kSqrt2OverPi * (1.0f + 3.0f * kCubic * x[i] * x[i]);
    dx[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * x[i] * (1.0f - t * t) * du);
  }
}

}  // namespace meshtrain::ops::cpu
