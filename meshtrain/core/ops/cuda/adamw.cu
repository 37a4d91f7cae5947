// One AdamW step on f32 tensors, elementwise, with the arithmetic of torch.optim.AdamW (and of the
// CPU kernel): decoupled decay, then step_size * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
#include <cmath>

#include "meshtrain/core/ops/cuda/cuda_ops.h"
#include "meshtrain/core/ops/cuda/kernel_utils.cuh"

namespace meshtrain::ops::cuda {

namespace {

struct AdamWUpdate {
  float* param;
  const float* grad;
  float* exp_avg;
  float* exp_avg_sq;
  float beta1, beta2, eps, decay, step_size, inv_bc2_sqrt;
  __device__ void operator()(int64_t i) const {
    const float g = grad[i];
    const float m = beta1 * exp_avg[i] + (1.0f - beta1) * g;
    const float v = beta2 * exp_avg_sq[i] + (1.0f - beta2) * g * g;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    param[i] = param[i] * decay - step_size * m / (sqrtf(v) * inv_bc2_sqrt + eps);
  }
};

}  // namespace

void adamw_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                const Tensor& exp_avg_sq, const AdamWHyper& hyper, int64_t step) {
  use_device(param);
  // Bias corrections in double on the host, as PyTorch computes them in Python floats.
  const double t = static_cast<double>(step);
  const float step_size = static_cast<float>(hyper.lr / (1.0 - std::pow(double{hyper.beta1}, t)));
  const float inv_bc2_sqrt =
      static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(double{hyper.beta2}, t)));
  launch_elementwise(param.numel(),
                     AdamWUpdate{ptr<float>(param), ptr<float>(grad), ptr<float>(exp_avg),
                                 ptr<float>(exp_avg_sq), hyper.beta1, hyper.beta2, hyper.eps,
                                 1.0f - hyper.lr * hyper.weight_decay, step_size, inv_bc2_sqrt});
}

}  // namespace meshtrain::ops::cuda
