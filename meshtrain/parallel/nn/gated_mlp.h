// Llama's gated MLP (SwiGLU, Shazeer 2020): down(silu(gate(x)) * up(x)), weights stored
// [out, in]. Under tensor parallelism gate and up are column-parallel and down row-parallel, so
// the gating runs on each rank's slice of the hidden features and the MLP needs one reduction
// forward and one backward, as GPT-2's (Megatron-LM §3).
#pragma once

#include "meshtrain/parallel/nn/linear.h"

namespace meshtrain::nn {

class GatedMlp {
 public:
  GatedMlp(Parameter* gate_weight, Parameter* up_weight, Parameter* down_weight)
      : gate_(gate_weight, nullptr, 1, WeightLayout::out_in),
        up_(up_weight, nullptr, 1, WeightLayout::out_in),
        down_(down_weight, nullptr, 1, WeightLayout::out_in) {}
  Linear& gate() { return gate_; }
  Linear& up() { return up_; }
  Linear& down() { return down_; }

  Tensor forward(const Tensor& x, Tape& tape);
  // As Linear::backward; backward_weight takes the deferred parts in reverse order.
  Tensor backward(const Tensor& d_y, Tape& tape, Tape* deferred = nullptr);
  void backward_weight(Tape& deferred);

 private:
  Linear gate_;
  Linear up_;
  Linear down_;
};

}  // namespace meshtrain::nn
