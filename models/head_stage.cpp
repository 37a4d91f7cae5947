#include "models/head_stage.h"

#include "core/error.h"
#include "core/ops/ops.h"
#include "models/stage_tensors.h"

namespace meshtrain {

namespace {
constexpr float kLayerNormEps = 1e-5f;
enum Saved { kIn, kLn, kMean, kRstd, kLogits, kTargets };
}  // namespace

void HeadStage::forward(MicroBatch& mb, int stage_index) {
  MemoryCategoryScope scope(MemoryCategory::activation);
  const Tensor x = mb.hidden;
  const Tensor& wte = wte_->value();
  MT_CHECK(x.defined() && x.ndim() == 3 && x.dim(2) == wte.dim(1),
           "head: mb.hidden must be [b, T, ", wte.dim(1), "], got ",
           x.defined() ? x.describe() : "undefined");
  const int64_t rows = x.dim(0) * x.dim(1), dim = x.dim(2);
  MT_CHECK(mb.targets.defined() && mb.targets.dtype() == DType::i32 && mb.targets.numel() == rows,
           "head: mb.targets must be i32 [b, T] like the tokens (", rows, " ids), got ",
           mb.targets.defined() ? mb.targets.describe() : "undefined");
  const Tensor targets = on_device_of(wte, mb.targets).flatten();
  const Tensor flat = x.reshape({rows, dim});

  Tensor ln = activation_like(wte, {rows, dim});
  Tensor mean = f32_like(wte, {rows}), rstd = f32_like(wte, {rows});
  ops::layernorm_forward(ln, mean, rstd, flat, ln_f_weight_->value(), ln_f_bias_->value(),
                         kLayerNormEps);
  Tensor logits = activation_like(wte, {rows, wte.dim(0)});
  ops::matmul(logits, ln, wte, false, true, 1.0f, 0.0f);
  Tensor losses = f32_like(wte, {rows});
  ops::cross_entropy_forward(losses, logits, targets);
  double sum = 0.0;
  for (float loss : losses.to_vector()) sum += loss;
  mb.loss_sum += sum;

  mb.save(stage_index, {x, ln, mean, rstd, logits, targets});
  mb.hidden = Tensor();
}

void HeadStage::backward(MicroBatch& mb, int stage_index) {
  MemoryCategoryScope scope(MemoryCategory::activation);
  MT_CHECK(
      mb.loss_scale > 0.0f,
      "head backward: set mb.loss_scale (1 / tokens in the global batch) before backward, got ",
      mb.loss_scale);
  std::vector<Tensor> s = mb.take(stage_index);
  const Tensor& wte = wte_->value();
  const int64_t rows = s[kLn].dim(0), dim = s[kLn].dim(1);

  Tensor d_logits = activation_like(s[kLogits], s[kLogits].shape());
  ops::cross_entropy_backward(d_logits, s[kLogits], s[kTargets], mb.loss_scale);
  s[kLogits] = Tensor();  // the largest activation; free it before allocating more
  Tensor d_ln = activation_like(s[kLn], {rows, dim});
  ops::matmul(d_ln, d_logits, wte, false, false, 1.0f, 0.0f);
  if (wte_->requires_grad()) ops::matmul(wte_->grad(), d_logits, s[kLn], true, false, 1.0f, 1.0f);
  d_logits = Tensor();
  Tensor d_in = activation_like(s[kLn], s[kIn].shape());
  ops::layernorm_backward(d_in, grad_target(*ln_f_weight_), grad_target(*ln_f_bias_), d_ln,
                          s[kIn].reshape({rows, dim}), ln_f_weight_->value(), s[kMean], s[kRstd]);
  mb.hidden = d_in;
}

Tensor HeadStage::logits(const Tensor& hidden) {
  MemoryCategoryScope scope(MemoryCategory::activation);
  const Tensor& wte = wte_->value();
  const int64_t dim = wte.dim(1);
  MT_CHECK(hidden.defined() && hidden.ndim() >= 1 && hidden.dim(-1) == dim,
           "head logits: hidden must be [..., ", dim, "], got ",
           hidden.defined() ? hidden.describe() : "undefined");
  const int64_t rows = hidden.numel() / dim;
  Tensor ln = activation_like(wte, {rows, dim});
  Tensor mean = f32_like(wte, {rows}), rstd = f32_like(wte, {rows});
  ops::layernorm_forward(ln, mean, rstd, hidden.reshape({rows, dim}), ln_f_weight_->value(),
                         ln_f_bias_->value(), kLayerNormEps);
  Tensor out = activation_like(wte, {rows, wte.dim(0)});
  ops::matmul(out, ln, wte, false, true, 1.0f, 0.0f);
  return out;
}

}  // namespace meshtrain
