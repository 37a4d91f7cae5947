#include "meshtrain/models/llama_decoder.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "meshtrain/core/error.h"
#include "meshtrain/core/ops/ops.h"
#include "meshtrain/models/decoder_kernels.h"

namespace meshtrain {

namespace {

Tensor host_value(const Parameter& p) { return decoder_host_value(p, "LlamaDecoder"); }

// out [N, out] = in [N, in] @ weight^T, weight [out, in] (torch.nn.Linear, no bias).
void linear(const Tensor& out, const Tensor& in, const Tensor& weight) {
  ops::matmul(out, in, weight, false, true, 1.0f, 0.0f);
}
}  // namespace

LlamaDecoder::LlamaDecoder(Llama& model)
    : config_(model.config()),
      rope_theta_(static_cast<float>(config_.rope_theta)),
      eps_(static_cast<float>(config_.rms_norm_eps)) {
  std::map<std::string, Tensor> values;
  for (Parameter* p : model.parameters()) values[p->name()] = host_value(*p);
  const auto value = [&](const std::string& name) {
    const auto it = values.find(name);
    MT_CHECK(it != values.end(), "LlamaDecoder: the model has no parameter '", name, "'");
    return it->second;
  };
  embed_tokens_ = value("model.embed_tokens.weight");
  norm_ = value("model.norm.weight");
  lm_head_ = config_.tie_embeddings ? embed_tokens_ : value("lm_head.weight");
  const int64_t t = config_.ctx, d = config_.dim, hd = config_.head_dim();
  const int64_t q = config_.heads * hd, kv = config_.kv_heads * hd, ffn = config_.ffn_dim;
  MemoryCategoryScope scope(MemoryCategory::activation);
  for (int64_t i = 0; i < config_.layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    Block b;
    b.input_layernorm = value(p + "input_layernorm.weight");
    b.q_proj = value(p + "self_attn.q_proj.weight");
    b.k_proj = value(p + "self_attn.k_proj.weight");
    b.v_proj = value(p + "self_attn.v_proj.weight");
    b.o_proj = value(p + "self_attn.o_proj.weight");
    b.post_attention_layernorm = value(p + "post_attention_layernorm.weight");
    b.gate_proj = value(p + "mlp.gate_proj.weight");
    b.up_proj = value(p + "mlp.up_proj.weight");
    b.down_proj = value(p + "mlp.down_proj.weight");
    b.keys = Tensor::empty({config_.kv_heads, t, hd});
    b.values = Tensor::empty({config_.kv_heads, t, hd});
    blocks_.push_back(std::move(b));
  }
  x_ = Tensor::empty({t, d});
  normed_ = Tensor::empty({t, d});
  q_ = Tensor::empty({t, q});
  k_ = Tensor::empty({t, kv});
  v_ = Tensor::empty({t, kv});
  att_ = Tensor::empty({t, q});
  proj_ = Tensor::empty({t, d});
  gate_ = Tensor::empty({t, ffn});
  up_ = Tensor::empty({t, ffn});
  act_ = Tensor::empty({t, ffn});
  rstd_ = Tensor::empty({t});
  ids_ = Tensor::empty({t}, DType::i32);
  q_head_ = Tensor::empty({t, hd});
  out_head_ = Tensor::empty({t, hd});
  scores_ = Tensor::empty({t * t});
  logits_ = Tensor::empty({1, config_.vocab});
}

std::vector<float> LlamaDecoder::append(std::span<const int32_t> tokens) {
  const auto n = static_cast<int64_t>(tokens.size());
  MT_CHECK(n >= 1, "LlamaDecoder::append: needs at least one token");
  MT_CHECK(length_ + n <= config_.ctx, "LlamaDecoder::append: ", n, " tokens at position ", length_,
           " run past the context length ", config_.ctx,
           "; reset() and encode at most ctx tokens to go on");
  int32_t* ids = ids_.data<int32_t>();
  for (int64_t i = 0; i < n; ++i) {
    MT_CHECK(tokens[i] >= 0 && tokens[i] < config_.vocab, "LlamaDecoder::append: token ", tokens[i],
             " outside the vocabulary [0, ", config_.vocab, ")");
    ids[i] = tokens[i];
  }
  // embed_tokens[tokens]: positions enter through the rotary embeddings.
  ops::embedding_forward(x_.rows(0, n), ids_.rows(0, n), embed_tokens_, 0);
  for (Block& block : blocks_) run_block(block, n);
  length_ += n;
  // The head over the last row only: model.norm, then lm_head (embed_tokens when tied).
  const Tensor last = normed_.rows(0, 1);
  ops::rmsnorm_forward(last, rstd_.rows(0, 1), x_.rows(n - 1, 1), norm_, eps_);
  linear(logits_, last, lm_head_);
  return logits_.to_vector();
}

// r = x + o_proj(attention(rope(q_proj(n)), rope(k_proj(n)), v_proj(n))), n = input_layernorm(x);
// out = r + down_proj(silu(gate_proj(m)) * up_proj(m)), m = post_attention_layernorm(r); in x_.
void LlamaDecoder::run_block(Block& b, int64_t n) {
  const int64_t hd = config_.head_dim();
  const Tensor x = x_.rows(0, n), normed = normed_.rows(0, n), rstd = rstd_.rows(0, n),
               proj = proj_.rows(0, n);
  const Tensor q = q_.rows(0, n), k = k_.rows(0, n);
  ops::rmsnorm_forward(normed, rstd, x, b.input_layernorm, eps_);
  linear(q, normed, b.q_proj);
  linear(k, normed, b.k_proj);
  linear(v_.rows(0, n), normed, b.v_proj);
  // The rotary angles of the absolute positions [length_, length_ + n).
  ops::rotary_forward(q.reshape({1, n, q.dim(1)}), hd, rope_theta_, length_);
  ops::rotary_forward(k.reshape({1, n, k.dim(1)}), hd, rope_theta_, length_);
  attend(b, n);
  linear(proj, att_.rows(0, n), b.o_proj);
  ops::add(x, proj, x);
  ops::rmsnorm_forward(normed, rstd, x, b.post_attention_layernorm, eps_);
  linear(gate_.rows(0, n), normed, b.gate_proj);
  linear(up_.rows(0, n), normed, b.up_proj);
  ops::swiglu_forward(act_.rows(0, n), gate_.rows(0, n), up_.rows(0, n));
  linear(proj, act_.rows(0, n), b.down_proj);
  ops::add(x, proj, x);
}

void LlamaDecoder::attend(Block& b, int64_t n) {
  const int64_t hd = config_.head_dim(), ctx = config_.ctx;
  const int64_t heads = config_.heads, kv_heads = config_.kv_heads, group = heads / kv_heads;
  const int64_t seen = length_ + n;  // keys each new row may see, at most
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  // Rows i of k_ and v_ hold KV heads of hd columns each: head g's go to its cache rows.
  const float* k = k_.data<float>();
  const float* v = v_.data<float>();
  for (int64_t g = 0; g < kv_heads; ++g) {
    float* keys = b.keys.data<float>() + (g * ctx + length_) * hd;
    float* values = b.values.data<float>() + (g * ctx + length_) * hd;
    for (int64_t i = 0; i < n; ++i) {
      std::copy_n(k + (i * kv_heads + g) * hd, hd, keys + i * hd);
      std::copy_n(v + (i * kv_heads + g) * hd, hd, values + i * hd);
    }
  }
  const float* q = q_.data<float>();
  float* att = att_.data<float>();
  float* q_head = q_head_.data<float>();
  const Tensor scores = scores_.view(0, {n, seen}), out = out_head_.rows(0, n);
  for (int64_t h = 0; h < heads; ++h) {
    const int64_t g = h / group;  // the key/value head query head h reads
    for (int64_t i = 0; i < n; ++i) std::copy_n(q + (i * heads + h) * hd, hd, q_head + i * hd);
    const Tensor head_keys = b.keys.view(g * ctx * hd, {seen, hd});
    const Tensor head_values = b.values.view(g * ctx * hd, {seen, hd});
    ops::matmul(scores, q_head_.rows(0, n), head_keys, false, true, scale, 0.0f);
    float* s = scores.data<float>();
    for (int64_t i = 0; i < n; ++i) causal_softmax_row(s + i * seen, length_ + i + 1, seen);
    ops::matmul(out, scores, head_values, false, false, 1.0f, 0.0f);
    const float* o = out.data<float>();
    for (int64_t i = 0; i < n; ++i) std::copy_n(o + i * hd, hd, att + (i * heads + h) * hd);
  }
}

}  // namespace meshtrain
