// AdamW with PyTorch's semantics: decoupled weight decay, then bias-corrected Adam. f32 only (the
// tensors are the f32 master weights and their moments); vectorised (simd.h; sqrt and the divide
// vectorise with -fno-math-errno) and split across threads.
#include <cmath>

#include "meshtrain/core/ops/cpu/cpu_ops.h"
#include "meshtrain/core/ops/cpu/parallel.h"
#include "meshtrain/core/ops/cpu/simd.h"

namespace meshtrain::ops::cpu {

namespace {
struct AdamWStep {
  float b1, b2, step_size, inv_bc2_sqrt, decay, eps;
};

MT_CLONES void adamw_block(float* p, const float* g, float* m, float* v, int64_t n, AdamWStep s) {
  for (int64_t i = 0; i < n; ++i) {
    const float mi = s.b1 * m[i] + (1.0f - s.b1) * g[i];
    const float vi = s.b2 * v[i] + (1.0f - s.b2) * g[i] * g[i];
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] * s.decay - s.step_size * mi / (std::sqrt(vi) * s.inv_bc2_sqrt + s.eps);
  }
}
}  // namespace

void adamw_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                const Tensor& exp_avg_sq, const AdamWHyper& hyper, int64_t step) {
  const double t = static_cast<double>(step);
  // As torch.optim.AdamW: step_size = lr / (1 - b1^t), denom = sqrt(v) / sqrt(1 - b2^t) + eps.
  AdamWStep s;
  s.step_size = static_cast<float>(hyper.lr / (1.0 - std::pow(double{hyper.beta1}, t)));
  s.inv_bc2_sqrt = static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(double{hyper.beta2}, t)));
  s.decay = 1.0f - hyper.lr * hyper.weight_decay;
  s.b1 = hyper.beta1;
  s.b2 = hyper.beta2;
  s.eps = hyper.eps;
  float* p = param.data<float>();
  const float* g = grad.data<float>();
  float* m = exp_avg.data<float>();
  float* v = exp_avg_sq.data<float>();
  parallel_for(param.numel(), 16384, [&](int64_t begin, int64_t end) {
    adamw_block(p + begin, g + begin, m + begin, v + begin, end - begin, s);
  });
}

}  // namespace meshtrain::ops::cpu
