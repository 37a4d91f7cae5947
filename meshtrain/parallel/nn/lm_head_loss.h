// The LM head tied to the token embedding and its cross-entropy: logits = x @ wte^T, loss per
// token = -log softmax(logits)[target].
//
// Style `vocab` (Megatron's vocab-parallel cross-entropy): each tp rank holds the same vocabulary
// rows of wte as the embedding and computes logits for those only, [rows, V / tp]. The softmax is
// assembled from three per-row reductions over tp — the row maximum, the sum of exponentials and
// the target's logit, which only its owner has — so no rank ever holds [rows, V] and the loss
// moves O(rows) elements. The input is entered through f (all-gathered rows under sequence
// parallelism); every tp rank ends with the same loss.
#pragma once

#include "meshtrain/parallel/micro_batch.h"
#include "meshtrain/parallel/nn/module.h"

namespace meshtrain::nn {

class LmHeadLoss : public Module {
 public:
  explicit LmHeadLoss(Parameter* wte) : wte_(wte) {}
  std::vector<Parameter*> parameters() override { return {wte_}; }
  void check_parallel(TpStyle style, int tp) const override;
  void parallelize(TpStyle style, const TpSetup& setup) override;

  // x [this rank's rows, C], targets i32 [all rows]: returns the sum of the token losses.
  double forward(const Tensor& x, const Tensor& targets, Tape& tape);
  // d loss / d token loss = scale; returns the gradient of x. With `deferred`, wte's gradient
  // waits for backward_weight.
  Tensor backward(float scale, Tape& tape, Tape* deferred = nullptr);
  void backward_weight(Tape& deferred);
  // Logits [rows, V] for inference; only without tensor parallelism.
  Tensor logits(const Tensor& x);

 private:
  Parameter* wte_;
  int64_t vocab_start_ = 0;
  TensorParallel tp_;
};

}  // namespace meshtrain::nn
