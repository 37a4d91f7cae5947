#include "meshtrain/parallel/nn/layer_norm.h"

#include "meshtrain/core/error.h"
#include "meshtrain/core/ops/ops.h"
#include "meshtrain/parallel/nn/activations.h"

namespace meshtrain::nn {

namespace {
constexpr float kEps = 1e-5f;
}

void LayerNorm::check_parallel(TpStyle style, int tp) const {
  if (style != TpStyle::sequence) Module::check_parallel(style, tp);
}

void LayerNorm::parallelize(TpStyle style, const TpSetup& setup) {
  check_parallel(style, setup.tp.size());
  tp_ = setup.tp;
}

Tensor LayerNorm::forward(const Tensor& x, Tape& tape) {
  const Tensor& w = weight_->value();
  MT_CHECK(x.ndim() == 2 && x.dim(1) == w.dim(0), "LayerNorm '", weight_->name(),
           "': input must be [rows, ", w.dim(0), "], got ", x.describe());
  const int64_t rows = x.dim(0);
  Tensor y = activation_like(w, x.shape());
  Tensor mean = f32_like(w, {rows}), rstd = f32_like(w, {rows});
  ops::layernorm_forward(y, mean, rstd, x, w, bias_->value(), kEps);
  tape.push(x);
  tape.push(mean);
  tape.push(rstd);
  return y;
}

Tensor LayerNorm::backward(const Tensor& d_y, Tape& tape) {
  const Tensor rstd = tape.pop(), mean = tape.pop(), x = tape.pop();
  Tensor d_x = activation_like(x, x.shape());
  if (!tp_.splits_rows()) {
    ops::layernorm_backward(d_x, grad_target(*weight_), grad_target(*bias_), d_y, x,
                            weight_->value(), mean, rstd);
    return d_x;
  }
  // This rank saw only its rows: sum both weight gradients over tp in one all-reduce.
  const int64_t c = x.dim(1);
  Tensor partial = Tensor::zeros({2 * c}, weight_->value().dtype(), x.device());
  ops::layernorm_backward(d_x, partial.view(0, {c}), partial.view(c, {c}), d_y, x,
                          weight_->value(), mean, rstd);
  tp_.all_reduce(partial);
  if (weight_->requires_grad()) ops::axpy(weight_->grad(), 1.f, partial.view(0, {c}));
  if (bias_->requires_grad()) ops::axpy(bias_->grad(), 1.f, partial.view(c, {c}));
  return d_x;
}

}  // namespace meshtrain::nn
