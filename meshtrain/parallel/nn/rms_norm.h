// RMSNorm over the features of token rows [rows, C] (Zhang & Sennrich 2019; Llama's):
// x * rsqrt(mean(x^2) + eps) * weight, the statistics in f32.
// Style `sequence`: the weight stays replicated; under sequence parallelism each tp rank
// normalises only its rows, so the weight gradients of its rows are summed over tp.
#pragma once

#include "meshtrain/parallel/micro_batch.h"
#include "meshtrain/parallel/nn/module.h"

namespace meshtrain::nn {

class RmsNorm : public Module {
 public:
  RmsNorm(Parameter* weight, float eps);
  std::vector<Parameter*> parameters() override { return {weight_}; }
  void check_parallel(TpStyle style, int tp) const override;
  void parallelize(TpStyle style, const TpSetup& setup) override;
  const TensorParallel& tp() const { return tp_; }

  Tensor forward(const Tensor& x, Tape& tape);
  Tensor backward(const Tensor& d_y, Tape& tape);

 private:
  Parameter* weight_;
  float eps_;
  TensorParallel tp_;
};

}  // namespace meshtrain::nn
