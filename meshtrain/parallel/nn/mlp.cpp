#include "meshtrain/parallel/nn/mlp.h"

#include "meshtrain/core/ops/ops.h"
#include "meshtrain/parallel/nn/activations.h"

namespace meshtrain::nn {

Tensor Mlp::forward(const Tensor& x, Tape& tape) {
  const Tensor fc = c_fc_.forward(x, tape);
  Tensor gelu = activation_like(fc, fc.shape());
  ops::gelu_forward(gelu, fc);
  tape.push(fc);
  return c_proj_.forward(gelu, tape);
}

Tensor Mlp::backward(const Tensor& d_y, Tape& tape, Tape* deferred) {
  const Tensor d_gelu = c_proj_.backward(d_y, tape, deferred);
  const Tensor fc = tape.pop();
  Tensor d_fc = activation_like(fc, fc.shape());
  ops::gelu_backward(d_fc, d_gelu, fc);
  return c_fc_.backward(d_fc, tape, deferred);
}

void Mlp::backward_weight(Tape& deferred) {
  c_fc_.backward_weight(deferred);
  c_proj_.backward_weight(deferred);
}

}  // namespace meshtrain::nn
