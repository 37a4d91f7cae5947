#include "parallel/nn/mlp.h"

#include "core/ops/ops.h"
#include "parallel/nn/activations.h"

namespace meshtrain::nn {

Tensor Mlp::forward(const Tensor& x, Tape& tape) {
  const Tensor fc = c_fc_.forward(x, tape);
  Tensor gelu = activation_like(fc, fc.shape());
  ops::gelu_forward(gelu, fc);
  tape.push(fc);
  return c_proj_.forward(gelu, tape);
}

Tensor Mlp::backward(const Tensor& d_y, Tape& tape) {
  const Tensor d_gelu = c_proj_.backward(d_y, tape);
  const Tensor fc = tape.pop();
  Tensor d_fc = activation_like(fc, fc.shape());
  ops::gelu_backward(d_fc, d_gelu, fc);
  return c_fc_.backward(d_fc, tape);
}

}  // namespace meshtrain::nn
