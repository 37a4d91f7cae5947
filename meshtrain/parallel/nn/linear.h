// Linear: y[N, out] = x[N, in] @ W + bias[out], the weight stored in GPT-2's Conv1D layout
// (W = weight [in, out]) or in torch.nn.Linear's (weight [out, in], W = weight^T; Llama's, without
// a bias), as the checkpoint it loads from stores it, so that no weight is ever transposed.
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

enum class WeightLayout {
  in_out,  // [in, out]: GPT-2's Conv1D
  out_in,  // [out, in]: torch.nn.Linear
};

class Linear : public Module {
 public:
  Linear(Parameter* weight, Parameter* bias, int out_blocks = 1,
         WeightLayout layout = WeightLayout::in_out);
  std::vector<Parameter*> parameters() override;
  void check_parallel(TpStyle style, int tp) const override;
  void parallelize(TpStyle style, const TpSetup& setup) override;

  Tensor forward(const Tensor& x, Tape& tape);
  // The gradient of x. With `deferred`, the weight and bias gradients wait for backward_weight,
  // which finds what it needs there.
  Tensor backward(const Tensor& d_y, Tape& tape, Tape* deferred = nullptr);
  void backward_weight(Tape& deferred);

  // forward and backward in two parts, for linears of one style that read the same input (q, k
  // and v; gate and up): the input enters the tensor-parallel region once (one all-gather under
  // sequence parallelism, not one per linear), and the sum of their input gradients leaves it
  // once. forward(x) is forward_entered(enter(x)).
  Tensor enter(const Tensor& x) const;
  Tensor forward_entered(const Tensor& in, Tape& tape);
  Tensor backward_entered(const Tensor& d_y, Tape& tape, Tape* deferred = nullptr);
  Tensor enter_backward(const Tensor& d_in) const;
  // Whether `other` enters the same way (a shared input needs it).
  bool enters_like(const Linear& other) const { return mode_ == other.mode_; }

 private:
  enum class Mode { replicated, colwise, rowwise };
  int in_dim() const { return layout_ == WeightLayout::in_out ? 0 : 1; }  // of the weight
  int out_dim() const { return 1 - in_dim(); }
  // y = x @ W (+ bias); with d_in / d_weight undefined their GEMM is skipped.
  void compute_forward(const Tensor& y, const Tensor& in, bool add_bias) const;
  void compute_backward(const Tensor& d_in, const Tensor& d_out, const Tensor& in,
                        bool weight_grads) const;

  Parameter* weight_;
  Parameter* bias_;
  int out_blocks_;
  WeightLayout layout_;
  Mode mode_ = Mode::replicated;
  TensorParallel tp_;
};

}  // namespace meshtrain::nn
