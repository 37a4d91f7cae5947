// AdamW with PyTorch's semantics: decoupled weight decay, then bias-corrected Adam.
#include <cmath>

#include "core/ops/cpu/cpu_ops.h"

namespace meshtrain::ops::cpu {

void adamw_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                const Tensor& exp_avg_sq, const AdamWHyper& hyper, int64_t step) {
  const double t = static_cast<double>(step);
  // As torch.optim.AdamW: step_size = lr / (1 - b1^t), denom = sqrt(v) / sqrt(1 - b2^t) + eps.
  const float step_size = static_cast<float>(hyper.lr / (1.0 - std::pow(double{hyper.beta1}, t)));
  const float inv_bc2_sqrt =
      static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(double{hyper.beta2}, t)));
  const float decay = 1.0f - hyper.lr * hyper.weight_decay;
  const float b1 = hyper.beta1, b2 = hyper.beta2;
  float* p = param.data<float>();
  const float* g = grad.data<float>();
  float* m = exp_avg.data<float>();
  float* v = exp_avg_sq.data<float>();
  for (int64_t i = 0; i < param.numel(); ++i) {
    m[i] = b1 * m[i] + (1.0f - b1) * g[i];
    v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
    p[i] = p[i] * decay - step_size * m[i] / (std::sqrt(v[i]) * inv_bc2_sqrt + hyper.eps);
  }
}

}  // namespace meshtrain::ops::cpu
