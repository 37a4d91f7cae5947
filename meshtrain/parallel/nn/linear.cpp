#include "meshtrain/parallel/nn/linear.h"

#include "meshtrain/core/error.h"
#include "meshtrain/core/ops/ops.h"
#include "meshtrain/parallel/nn/activations.h"

namespace meshtrain::nn {

Linear::Linear(Parameter* weight, Parameter* bias, int out_blocks, WeightLayout layout)
    : weight_(weight), bias_(bias), out_blocks_(out_blocks), layout_(layout) {
  MT_CHECK(weight_ != nullptr && weight_->global_shape().size() == 2,
           "Linear needs a two-dimensional weight");
  MT_CHECK(bias_ == nullptr || layout_ == WeightLayout::in_out, "Linear '", weight_->name(),
           "': a weight stored [out, in] takes no bias here, got '", bias_ ? bias_->name() : "",
           "'");
  MT_CHECK(bias_ == nullptr || bias_->global_shape() == Shape{weight_->global_shape()[1]},
           "Linear: bias '", bias_ ? bias_->name() : "",
           "' must be [out] like the weight's columns");
}

std::vector<Parameter*> Linear::parameters() {
  if (bias_) return {weight_, bias_};
  return {weight_};
}

void Linear::check_parallel(TpStyle style, int tp) const {
  if (style != TpStyle::colwise && style != TpStyle::rowwise) Module::check_parallel(style, tp);
  if (style == TpStyle::rowwise && out_blocks_ != 1)
    throw InvalidArgument(detail::concat("Linear '", weight_->name(), "': its output packs ",
                                         out_blocks_, " blocks, which cannot be row-parallel"));
}

void Linear::parallelize(TpStyle style, const TpSetup& setup) {
  MT_CHECK(mode_ == Mode::replicated, "Linear '", weight_->name(), "' is parallelized twice");
  check_parallel(style, setup.tp.size());
  if (style == TpStyle::colwise) {
    shard_on_tp(*weight_, Shard{out_dim(), out_blocks_}, setup);
    if (bias_) shard_on_tp(*bias_, Shard{0, out_blocks_}, setup);
    mode_ = Mode::colwise;
  } else {
    shard_on_tp(*weight_, Shard{in_dim()}, setup);
    mode_ = Mode::rowwise;
  }
  tp_ = setup.tp;
}

void Linear::compute_forward(const Tensor& y, const Tensor& in, bool add_bias) const {
  const Tensor& w = weight_->value();
  if (layout_ == WeightLayout::in_out)
    ops::linear_forward(y, in, w, add_bias ? bias_->value() : Tensor());
  else
    ops::matmul(y, in, w, false, true, 1.0f, 0.0f);
}

void Linear::compute_backward(const Tensor& d_in, const Tensor& d_out, const Tensor& in,
                              bool weight_grads) const {
  const Tensor& w = weight_->value();
  const Tensor d_weight = weight_grads ? grad_or_none(weight_) : Tensor();
  if (layout_ == WeightLayout::in_out) {
    ops::linear_backward(d_in, d_weight, weight_grads ? grad_or_none(bias_) : Tensor(), d_out, in,
                         w);
    return;
  }
  if (d_in.defined()) ops::matmul(d_in, d_out, w, false, false, 1.0f, 0.0f);
  // Gradients accumulate (+=) over micro-batches.
  if (d_weight.defined()) ops::matmul(d_weight, d_out, in, true, false, 1.0f, 1.0f);
}

Tensor Linear::enter(const Tensor& x) const { return mode_ == Mode::colwise ? tp_.enter(x) : x; }

Tensor Linear::enter_backward(const Tensor& d_in) const {
  return mode_ == Mode::colwise ? tp_.enter_backward(d_in) : d_in;
}

Tensor Linear::forward(const Tensor& x, Tape& tape) { return forward_entered(enter(x), tape); }

Tensor Linear::backward(const Tensor& d_y, Tape& tape, Tape* deferred) {
  return enter_backward(backward_entered(d_y, tape, deferred));
}

Tensor Linear::forward_entered(const Tensor& in, Tape& tape) {
  const Tensor& w = weight_->value();
  MT_CHECK(in.ndim() == 2 && in.dim(1) == w.dim(in_dim()), "Linear '", weight_->name(),
           "': input must be [rows, ", w.dim(in_dim()), "], got ", in.describe());
  // Row-parallel: the replicated bias joins the sum over tp once, on its rank 0.
  const bool add_bias = bias_ && (mode_ != Mode::rowwise || tp_.rank() == 0);
  Tensor y = activation_like(w, {in.dim(0), w.dim(out_dim())});
  compute_forward(y, in, add_bias);
  tape.push(in);
  return mode_ == Mode::rowwise ? tp_.leave(y) : y;
}

Tensor Linear::backward_entered(const Tensor& d_y, Tape& tape, Tape* deferred) {
  const Tensor in = tape.pop();
  const Tensor d_out = mode_ == Mode::rowwise ? tp_.leave_backward(d_y) : d_y;
  Tensor d_in = activation_like(in, in.shape());
  compute_backward(d_in, d_out, in, /*weight_grads=*/deferred == nullptr);
  if (deferred) {
    deferred->push(in);
    deferred->push(d_out);
  }
  return d_in;
}

void Linear::backward_weight(Tape& deferred) {
  const Tensor d_out = deferred.pop(), in = deferred.pop();
  compute_backward(Tensor(), d_out, in, /*weight_grads=*/true);
}

}  // namespace meshtrain::nn
