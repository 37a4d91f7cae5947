// GPT-2's MLP: c_proj(gelu(c_fc(x))), 4x wide. Under tensor parallelism c_fc is column-parallel
// and c_proj row-parallel, so the GELU runs on each rank's slice of the hidden features and the
// block needs one reduction forward and one backward (Megatron-LM §3).
#pragma once

#include "meshtrain/parallel/nn/linear.h"

namespace meshtrain::nn {

class Mlp {
 public:
  Mlp(Parameter* fc_weight, Parameter* fc_bias, Parameter* proj_weight, Parameter* proj_bias)
      : c_fc_(fc_weight, fc_bias), c_proj_(proj_weight, proj_bias) {}
  Linear& c_fc() { return c_fc_; }
  Linear& c_proj() { return c_proj_; }

  Tensor forward(const Tensor& x, Tape& tape);
  // As Linear::backward; backward_weight takes the deferred parts in reverse order.
  Tensor backward(const Tensor& d_y, Tape& tape, Tape* deferred = nullptr);
  void backward_weight(Tape& deferred);

 private:
  Linear c_fc_;
  Linear c_proj_;
};

}  // namespace meshtrain::nn
