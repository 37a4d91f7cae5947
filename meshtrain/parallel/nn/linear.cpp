#include "meshtrain/parallel/nn/linear.h"

#include "meshtrain/core/error.h"
#include "meshtrain/core/ops/ops.h"
#include "meshtrain/parallel/nn/activations.h"

namespace meshtrain::nn {

Linear::Linear(Parameter* weight, Parameter* bias, int out_blocks)
    : weight_(weight), bias_(bias), out_blocks_(out_blocks) {
  MT_CHECK(weight_ != nullptr && weight_->global_shape().size() == 2,
           "Linear needs a weight [in, out]");
  MT_CHECK(bias_ == nullptr || bias_->global_shape() == Shape{weight_->global_shape()[1]},
           "Linear: bias '", bias_ ? bias_->name() : "", "' must be [out] like the weight's columns");
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
    shard_on_tp(*weight_, Shard{1, out_blocks_}, setup);
    if (bias_) shard_on_tp(*bias_, Shard{0, out_blocks_}, setup);
    mode_ = Mode::colwise;
  } else {
    shard_on_tp(*weight_, Shard{0}, setup);
    mode_ = Mode::rowwise;
  }
  tp_ = setup.tp;
}

Tensor Linear::forward(const Tensor& x, Tape& tape) {
  const Tensor& w = weight_->value();
  const Tensor in = mode_ == Mode::colwise ? tp_.enter(x) : x;
  MT_CHECK(in.ndim() == 2 && in.dim(1) == w.dim(0), "Linear '", weight_->name(),
           "': input must be [rows, ", w.dim(0), "], got ", in.describe());
  // Row-parallel: the replicated bias joins the sum over tp once, on its rank 0.
  const bool add_bias = bias_ && (mode_ != Mode::rowwise || tp_.rank() == 0);
  Tensor y = activation_like(w, {in.dim(0), w.dim(1)});
  ops::linear_forward(y, in, w, add_bias ? bias_->value() : Tensor());
  tape.push(in);
  return mode_ == Mode::rowwise ? tp_.leave(y) : y;
}

Tensor Linear::backward(const Tensor& d_y, Tape& tape, Tape* deferred) {
  const Tensor in = tape.pop();
  const Tensor d_out = mode_ == Mode::rowwise ? tp_.leave_backward(d_y) : d_y;
  Tensor d_in = activation_like(in, in.shape());
  if (deferred) {
    ops::matmul(d_in, d_out, weight_->value(), false, true, 1.0f, 0.0f);
    deferred->push(in);
    deferred->push(d_out);
  } else {
    ops::linear_backward(d_in, grad_or_none(weight_), grad_or_none(bias_), d_out, in,
                         weight_->value());
  }
  return mode_ == Mode::colwise ? tp_.enter_backward(d_in) : d_in;
}

void Linear::backward_weight(Tape& deferred) {
  const Tensor d_out = deferred.pop(), in = deferred.pop();
  ops::linear_backward(Tensor(), grad_or_none(weight_), grad_or_none(bias_), d_out, in,
                       weight_->value());
}

}  // namespace meshtrain::nn
