#include "meshtrain/parallel/nn/rms_norm.h"

#include "meshtrain/core/error.h"
#include "meshtrain/core/ops/ops.h"
#include "meshtrain/parallel/nn/activations.h"

namespace meshtrain::nn {

RmsNorm::RmsNorm(Parameter* weight, float eps) : weight_(weight), eps_(eps) {
  MT_CHECK(weight_ != nullptr && weight_->global_shape().size() == 1, "RMSNorm needs a weight [C]");
  MT_CHECK(eps_ >= 0.0f, "RMSNorm '", weight_->name(), "': eps must be >= 0, got ", eps_);
}

void RmsNorm::check_parallel(TpStyle style, int tp) const {
  if (style != TpStyle::sequence) Module::check_parallel(style, tp);
}

void RmsNorm::parallelize(TpStyle style, const TpSetup& setup) {
  check_parallel(style, setup.tp.size());
  tp_ = setup.tp;
}

Tensor RmsNorm::forward(const Tensor& x, Tape& tape) {
  const Tensor& w = weight_->value();
  MT_CHECK(x.ndim() == 2 && x.dim(1) == w.dim(0), "RMSNorm '", weight_->name(),
           "': input must be [rows, ", w.dim(0), "], got ", x.describe());
  Tensor y = activation_like(w, x.shape());
  Tensor rstd = f32_like(w, {x.dim(0)});
  ops::rmsnorm_forward(y, rstd, x, w, eps_);
  tape.push(x);
  tape.push(rstd);
  return y;
}

Tensor RmsNorm::backward(const Tensor& d_y, Tape& tape) {
  const Tensor rstd = tape.pop(), x = tape.pop();
  Tensor d_x = activation_like(x, x.shape());
  if (!tp_.splits_rows()) {
    ops::rmsnorm_backward(d_x, grad_or_none(weight_), d_y, x, weight_->value(), rstd);
    return d_x;
  }
  // This rank saw only its rows: sum the weight's gradient over tp.
  Tensor partial = Tensor::zeros(weight_->value().shape(), weight_->value().dtype(), x.device());
  ops::rmsnorm_backward(d_x, partial, d_y, x, weight_->value(), rstd);
  tp_.all_reduce(partial);
  if (weight_->requires_grad()) ops::axpy(weight_->grad(), 1.f, partial);
  return d_x;
}

}  // namespace meshtrain::nn
