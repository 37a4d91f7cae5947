// Linear in GPT-2's Conv1D layout: y[N, out] = x[N, in] @ weight[in, out] + bias[out].
//
// colwise (Megatron's column-parallel): each tp rank holds a slice of the output features and
// computes its slice of y from the whole input (entered through f). A packed weight whose output
// is `out_blocks` equal blocks side by side (GPT-2's c_attn: q | k | v) is split block by block,
// so each rank holds its heads' q, k and v columns.
// rowwise (row-parallel): each rank holds a slice of the input features, takes the matching slice
// of x (a colwise output) and its partial products are summed over tp (g); the replicated bias
// is added once, by tp rank 0 inside that sum.
#pragma once

#include "meshtrain/parallel/micro_batch.h"
#include "meshtrain/parallel/nn/module.h"

namespace meshtrain::nn {

class Linear : public Module {
 public:
  Linear(Parameter* weight, Parameter* bias, int out_blocks = 1);
  std::vector<Parameter*> parameters() override;
  void check_parallel(TpStyle style, int tp) const override;
  void parallelize(TpStyle style, const TpSetup& setup) override;

  Tensor forward(const Tensor& x, Tape& tape);
  // The gradient of x. With `deferred`, the weight and bias gradients wait for backward_weight,
  // which finds what it needs there.
  Tensor backward(const Tensor& d_y, Tape& tape, Tape* deferred = nullptr);
  void backward_weight(Tape& deferred);

 private:
  enum class Mode { replicated, colwise, rowwise };
  Parameter* weight_;
  Parameter* bias_;
  int out_blocks_;
  Mode mode_ = Mode::replicated;
  TensorParallel tp_;
};

}  // namespace meshtrain::nn
