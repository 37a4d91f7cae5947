#include "models/block_stage.h"

#include "core/error.h"
#include "core/ops/ops.h"
#include "models/stage_tensors.h"

namespace meshtrain {

namespace {
constexpr float kLayerNormEps = 1e-5f;

// What forward saves for backward, in this order.
enum Saved {
  kIn,
  kLn1,
  kMean1,
  kRstd1,
  kQkv,
  kAtt,
  kProbs,
  kResid,
  kLn2,
  kMean2,
  kRstd2,
  kFc,
  kGelu
};
}  // namespace

std::vector<Parameter*> BlockStage::parameters() {
  return {p_.ln_1_weight,      p_.ln_1_bias,      p_.attn_weight,     p_.attn_bias,
          p_.attn_proj_weight, p_.attn_proj_bias, p_.ln_2_weight,     p_.ln_2_bias,
          p_.fc_weight,        p_.fc_bias,        p_.mlp_proj_weight, p_.mlp_proj_bias};
}

void BlockStage::forward(MicroBatch& mb, int stage_index) {
  MemoryCategoryScope scope(MemoryCategory::activation);
  const Tensor x = mb.hidden;
  const Tensor& like = p_.attn_weight->value();
  const int64_t dim = like.dim(0);
  MT_CHECK(x.defined() && x.ndim() == 3 && x.dim(2) == dim, name_, ": mb.hidden must be [b, T, ",
           dim, "], got ", x.defined() ? x.describe() : "undefined");
  const int64_t batch = x.dim(0), seq = x.dim(1), rows = batch * seq;

  Tensor ln1 = activation_like(like, {batch, seq, dim});
  Tensor mean1 = f32_like(like, {rows}), rstd1 = f32_like(like, {rows});
  ops::layernorm_forward(ln1, mean1, rstd1, x, p_.ln_1_weight->value(), p_.ln_1_bias->value(),
                         kLayerNormEps);
  Tensor qkv = activation_like(like, {batch, seq, 3 * dim});
  ops::linear_forward(qkv, ln1, p_.attn_weight->value(), p_.attn_bias->value());
  Tensor att = activation_like(like, {batch, seq, dim});
  Tensor probs = f32_like(like, {batch, heads_, seq, seq});
  ops::attention_forward(att, probs, qkv, heads_);
  Tensor resid = activation_like(like, {batch, seq, dim});
  ops::linear_forward(resid, att, p_.attn_proj_weight->value(), p_.attn_proj_bias->value());
  ops::add(resid, resid, x);

  Tensor ln2 = activation_like(like, {batch, seq, dim});
  Tensor mean2 = f32_like(like, {rows}), rstd2 = f32_like(like, {rows});
  ops::layernorm_forward(ln2, mean2, rstd2, resid, p_.ln_2_weight->value(), p_.ln_2_bias->value(),
                         kLayerNormEps);
  Tensor fc = activation_like(like, {batch, seq, 4 * dim});
  ops::linear_forward(fc, ln2, p_.fc_weight->value(), p_.fc_bias->value());
  Tensor gelu = activation_like(like, {batch, seq, 4 * dim});
  ops::gelu_forward(gelu, fc);
  Tensor out = activation_like(like, {batch, seq, dim});
  ops::linear_forward(out, gelu, p_.mlp_proj_weight->value(), p_.mlp_proj_bias->value());
  ops::add(out, out, resid);

  mb.save(stage_index, {x, ln1, mean1, rstd1, qkv, att, probs, resid, ln2, mean2, rstd2, fc, gelu});
  mb.hidden = out;
}

void BlockStage::backward(MicroBatch& mb, int stage_index) {
  MemoryCategoryScope scope(MemoryCategory::activation);
  std::vector<Tensor> s = mb.take(stage_index);
  const Tensor d_out = mb.hidden;
  MT_CHECK(d_out.defined() && d_out.shape() == s[kIn].shape(), name_,
           " backward: mb.hidden must be the gradient of the output, ", s[kIn].describe(), ", got ",
           d_out.defined() ? d_out.describe() : "undefined");
  const Tensor& like = s[kIn];

  // MLP branch: out = resid + mlp(resid).
  Tensor d_gelu = activation_like(like, s[kGelu].shape());
  ops::linear_backward(d_gelu, grad_target(*p_.mlp_proj_weight), grad_target(*p_.mlp_proj_bias),
                       d_out, s[kGelu], p_.mlp_proj_weight->value());
  Tensor d_fc = activation_like(like, s[kFc].shape());
  ops::gelu_backward(d_fc, d_gelu, s[kFc]);
  Tensor d_ln2 = activation_like(like, like.shape());
  ops::linear_backward(d_ln2, grad_target(*p_.fc_weight), grad_target(*p_.fc_bias), d_fc, s[kLn2],
                       p_.fc_weight->value());
  Tensor d_resid = activation_like(like, like.shape());
  ops::layernorm_backward(d_resid, grad_target(*p_.ln_2_weight), grad_target(*p_.ln_2_bias), d_ln2,
                          s[kResid], p_.ln_2_weight->value(), s[kMean2], s[kRstd2]);
  ops::add(d_resid, d_resid, d_out);

  // Attention branch: resid = x + attn(x).
  Tensor d_att = activation_like(like, like.shape());
  ops::linear_backward(d_att, grad_target(*p_.attn_proj_weight), grad_target(*p_.attn_proj_bias),
                       d_resid, s[kAtt], p_.attn_proj_weight->value());
  Tensor d_qkv = activation_like(like, s[kQkv].shape());
  ops::attention_backward(d_qkv, d_att, s[kQkv], s[kProbs], heads_);
  Tensor d_ln1 = activation_like(like, like.shape());
  ops::linear_backward(d_ln1, grad_target(*p_.attn_weight), grad_target(*p_.attn_bias), d_qkv,
                       s[kLn1], p_.attn_weight->value());
  Tensor d_in = activation_like(like, like.shape());
  ops::layernorm_backward(d_in, grad_target(*p_.ln_1_weight), grad_target(*p_.ln_1_bias), d_ln1,
                          s[kIn], p_.ln_1_weight->value(), s[kMean1], s[kRstd1]);
  ops::add(d_in, d_in, d_resid);
  mb.hidden = d_in;
}

}  // namespace meshtrain
