// LayerNorm over the features of token rows [rows, C], eps 1e-5 as GPT-2.
// Style `sequence`: the weights stay replicated; under sequence parallelism each tp rank
// normalises only its rows, so the weight gradients of its rows are summed over tp.
#pragma once

#include "meshtrain/parallel/micro_batch.h"
#include "meshtrain/parallel/nn/module.h"

namespace meshtrain::nn {

class LayerNorm : public Module {
 public:
  LayerNorm(Parameter* weight, Parameter* bias) : weight_(weight), bias_(bias) {}
  std::vector<Parameter*> parameters() override { return {weight_, bias_}; }
  void check_parallel(TpStyle style, int tp) const override;
  void parallelize(TpStyle style, const TpSetup& setup) override;
  const TensorParallel& tp() const { return tp_; }

  Tensor forward(const Tensor& x, Tape& tape);
  Tensor backward(const Tensor& d_y, Tape& tape);

 private:
  Parameter* weight_;
  Parameter* bias_;
  TensorParallel tp_;
};

}  // namespace meshtrain::nn
