#include "meshtrain/parallel/nn/gated_mlp.h"

#include "meshtrain/core/error.h"
#include "meshtrain/core/ops/ops.h"
#include "meshtrain/parallel/nn/activations.h"

namespace meshtrain::nn {

Tensor GatedMlp::forward(const Tensor& x, Tape& tape) {
  MT_ASSERT(gate_.enters_like(up_), "gate and up read one input, so they share a style");
  const Tensor in = gate_.enter(x);
  const Tensor gate = gate_.forward_entered(in, tape);
  const Tensor up = up_.forward_entered(in, tape);
  Tensor hidden = activation_like(gate, gate.shape());
  ops::swiglu_forward(hidden, gate, up);
  tape.push(gate);
  tape.push(up);
  return down_.forward(hidden, tape);
}

Tensor GatedMlp::backward(const Tensor& d_y, Tape& tape, Tape* deferred) {
  const Tensor d_hidden = down_.backward(d_y, tape, deferred);
  const Tensor up = tape.pop(), gate = tape.pop();
  Tensor d_gate = activation_like(gate, gate.shape()), d_up = activation_like(up, up.shape());
  ops::swiglu_backward(d_gate, d_up, d_hidden, gate, up);
  // x fed both projections: its gradient is the sum of theirs, leaving the region once.
  const Tensor d_in = up_.backward_entered(d_up, tape, deferred);
  ops::add(d_in, d_in, gate_.backward_entered(d_gate, tape, deferred));
  return gate_.enter_backward(d_in);
}

void GatedMlp::backward_weight(Tape& deferred) {
  gate_.backward_weight(deferred);
  up_.backward_weight(deferred);
  down_.backward_weight(deferred);
}

}  // namespace meshtrain::nn
