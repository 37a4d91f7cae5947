// LayerNorm over the last dim, saving per-row mean and reciprocal std for the backward pass.
#include <cmath>

#include "core/ops/cpu/cpu_ops.h"

namespace meshtrain::ops::cpu {

void layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& in,
                       const Tensor& weight, const Tensor& bias, float eps) {
  const int64_t channels = weight.numel();
  const int64_t rows = channels ? in.numel() / channels : 0;
  const float* w = weight.data<float>();
  const float* b = bias.data<float>();
  float* means = mean.data<float>();
  float* rstds = rstd.data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = in.data<float>() + r * channels;
    float* y = out.data<float>() + r * channels;
    // Two passes (mean, then squared deviations) avoid the cancellation of E[x^2] - E[x]^2.
    float sum = 0.0f;
    for (int64_t c = 0; c < channels; ++c) sum += x[c];
    const float m = sum / static_cast<float>(channels);
    float sq = 0.0f;
    for (int64_t c = 0; c < channels; ++c) sq += (x[c] - m) * (x[c] - m);
    const float s = 1.0f / std::sqrt(sq / static_cast<float>(channels) + eps);
    for (int64_t c = 0; c < channels; ++c) y[c] = (x[c] - m) * s * w[c] + b[c];
    means[r] = m;
    rstds[r] = s;
  }
}

void layernorm_backward(const Tensor& d_in, const Tensor& d_weight, const Tensor& d_bias,
                        const Tensor& d_out, const Tensor& in, const Tensor& weight,
                        const Tensor& mean, const Tensor& rstd) {
  const int64_t channels = weight.numel();
  const int64_t rows = channels ? in.numel() / channels : 0;
  const float* w = weight.data<float>();
  float* dw = d_weight.data<float>();
  float* db = d_bias.data<float>();
  const float* means = mean.data<float>();
  const float* rstds = rstd.data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = in.data<float>() + r * channels;
    const float* dy = d_out.data<float>() + r * channels;
    float* dx = d_in.data<float>() + r * channels;
    const float m = means[r], s = rstds[r];
    // d_in = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = d_out * weight.
    float g_mean = 0.0f, g_xhat_mean = 0.0f;
    for (int64_t c = 0; c < channels; ++c) {
      const float g = dy[c] * w[c];
      g_mean += g;
      g_xhat_mean += g * (x[c] - m) * s;
    }
    g_mean /= static_cast<float>(channels);
    g_xhat_mean /= static_cast<float>(channels);
    for (int64_t c = 0; c < channels; ++c) {
      const float xhat = (x[c] - m) * s;
      dx[c] = (dy[c] * w[c] - g_mean - xhat * g_xhat_mean) * s;
      dw[c] += dy[c] * xhat;
      db[c] += dy[c];
    }
  }
}

}  // namespace meshtrain::ops::cpu
