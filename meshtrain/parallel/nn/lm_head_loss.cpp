#include "meshtrain/parallel/nn/lm_head_loss.h"

#include <cmath>

#include "meshtrain/core/error.h"
#include "meshtrain/core/ops/ops.h"
#include "meshtrain/parallel/nn/activations.h"
#include "meshtrain/parallel/nn/embedding.h"

namespace meshtrain::nn {

void LmHeadLoss::check_parallel(TpStyle style, int tp) const {
  if (style != TpStyle::vocab) Module::check_parallel(style, tp);
  check_vocabulary_split(*wte_, tp);
}

void LmHeadLoss::parallelize(TpStyle style, const TpSetup& setup) {
  check_parallel(style, setup.tp.size());
  vocab_start_ = shard_vocabulary(*wte_, setup);
  tp_ = setup.tp;
}

Tensor LmHeadLoss::logits(const Tensor& x) {
  MT_CHECK(tp_.size() == 1, "LmHeadLoss::logits materialises [rows, V]: only without tensor "
           "parallelism (gather the model first); got tensor parallelism of ", tp_.size());
  const Tensor& wte = wte_->value();
  Tensor out = activation_like(wte, {x.dim(0), wte.dim(0)});
  ops::matmul(out, x, wte, false, true, 1.0f, 0.0f);
  return out;
}

double LmHeadLoss::forward(const Tensor& x, const Tensor& targets, Tape& tape) {
  const Tensor& wte = wte_->value();
  const Tensor in = tp_.enter(x);
  const int64_t rows = in.dim(0);
  MT_CHECK(in.ndim() == 2 && in.dim(1) == wte.dim(1), "LM head: input must be [rows, ", wte.dim(1),
           "], got ", in.describe());
  MT_CHECK(targets.defined() && targets.dtype() == DType::i32 && targets.numel() == rows,
           "LM head: targets must be i32 with one id per token row (", rows, "), got ",
           targets.defined() ? targets.describe() : "undefined");
  check_token_ids(targets, wte_->global_shape()[0], "LM head: target");
  const Tensor ids = on_device_of(wte, targets).flatten();
  Tensor logits = activation_like(wte, {rows, wte.dim(0)});
  ops::matmul(logits, in, wte, false, true, 1.0f, 0.0f);

  // The softmax over the whole vocabulary from per-rank pieces: max, then exp-sums and the
  // target's logit (one all-reduce for both).
  Tensor row_max = f32_like(wte, {rows});
  ops::cross_entropy_row_max(row_max, logits);
  if (tp_.size() > 1) tp_.comm->all_reduce(row_max, ReduceOp::max)->wait();
  Tensor partials = f32_like(wte, {2 * rows});
  const Tensor sum_exp = partials.view(0, {rows}), target_logit = partials.view(rows, {rows});
  ops::cross_entropy_partials(sum_exp, target_logit, logits, ids, row_max, vocab_start_);
  tp_.all_reduce(partials);
  tape.push(in);
  tape.push(ids);
  tape.push(logits);
  tape.push(row_max);
  tape.push(sum_exp);
  if (logits.device().is_meta()) return 0.0;  // a dry run: the pass has no values, so no loss

  const std::vector<float> m = row_max.to_vector(), p = partials.to_vector();
  double loss_sum = 0.0;
  for (int64_t r = 0; r < rows; ++r)
    loss_sum += std::log(static_cast<double>(p[r])) + m[r] - p[rows + r];
  return loss_sum;
}

Tensor LmHeadLoss::backward(float scale, Tape& tape, Tape* deferred) {
  const Tensor sum_exp = tape.pop(), row_max = tape.pop();
  Tensor logits = tape.pop();
  const Tensor ids = tape.pop(), in = tape.pop();
  const Tensor& wte = wte_->value();
  Tensor d_logits = activation_like(logits, logits.shape());
  ops::cross_entropy_backward(d_logits, logits, ids, row_max, sum_exp, vocab_start_, scale);
  logits = Tensor();  // the largest activation; free it before allocating more
  Tensor d_in = activation_like(in, in.shape());
  ops::matmul(d_in, d_logits, wte, false, false, 1.0f, 0.0f);
  if (deferred) {
    deferred->push(in);
    deferred->push(d_logits);
  } else if (wte_->requires_grad()) {
    ops::matmul(wte_->grad(), d_logits, in, true, false, 1.0f, 1.0f);
  }
  return tp_.enter_backward(d_in);
}

void LmHeadLoss::backward_weight(Tape& deferred) {
  const Tensor d_logits = deferred.pop(), in = deferred.pop();
  if (wte_->requires_grad()) ops::matmul(wte_->grad(), d_logits, in, true, false, 1.0f, 1.0f);
}

}  // namespace meshtrain::nn
