#include "meshtrain/models/gpt2_decoder.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "meshtrain/core/error.h"
#include "meshtrain/core/ops/ops.h"
#include "meshtrain/models/decoder_kernels.h"

namespace meshtrain {

namespace {
constexpr float kLayerNormEps = 1e-5f;  // GPT-2's, as in nn::LayerNorm

Tensor host_value(const Parameter& p) { return decoder_host_value(p, "Gpt2Decoder"); }
}  // namespace

Gpt2Decoder::Gpt2Decoder(GPT2& model) : config_(model.config()) {
  wte_ = host_value(model.parameter("wte.weight"));
  wpe_ = host_value(model.parameter("wpe.weight"));
  ln_f_weight_ = host_value(model.parameter("ln_f.weight"));
  ln_f_bias_ = host_value(model.parameter("ln_f.bias"));
  const int64_t t = config_.ctx, d = config_.dim, hd = config_.head_dim();
  MemoryCategoryScope scope(MemoryCategory::activation);
  for (int64_t i = 0; i < config_.layers; ++i) {
    const BlockParameters& p = model.block_parameters(i);
    Block b;
    b.ln_1_weight = host_value(*p.ln_1_weight);
    b.ln_1_bias = host_value(*p.ln_1_bias);
    b.attn_weight = host_value(*p.attn_weight);
    b.attn_bias = host_value(*p.attn_bias);
    b.attn_proj_weight = host_value(*p.attn_proj_weight);
    b.attn_proj_bias = host_value(*p.attn_proj_bias);
    b.ln_2_weight = host_value(*p.ln_2_weight);
    b.ln_2_bias = host_value(*p.ln_2_bias);
    b.fc_weight = host_value(*p.fc_weight);
    b.fc_bias = host_value(*p.fc_bias);
    b.mlp_proj_weight = host_value(*p.mlp_proj_weight);
    b.mlp_proj_bias = host_value(*p.mlp_proj_bias);
    b.keys = Tensor::empty({config_.heads, t, hd});
    b.values = Tensor::empty({config_.heads, t, hd});
    blocks_.push_back(std::move(b));
  }
  x_ = Tensor::empty({t, d});
  ln_ = Tensor::empty({t, d});
  qkv_ = Tensor::empty({t, 3 * d});
  att_ = Tensor::empty({t, d});
  proj_ = Tensor::empty({t, d});
  fc_ = Tensor::empty({t, 4 * d});
  gelu_ = Tensor::empty({t, 4 * d});
  mean_ = Tensor::empty({t});
  rstd_ = Tensor::empty({t});
  ids_ = Tensor::empty({t}, DType::i32);
  q_head_ = Tensor::empty({t, hd});
  out_head_ = Tensor::empty({t, hd});
  scores_ = Tensor::empty({t * t});
  logits_ = Tensor::empty({1, config_.vocab});
}

std::vector<float> Gpt2Decoder::append(std::span<const int32_t> tokens) {
  const auto n = static_cast<int64_t>(tokens.size());
  MT_CHECK(n >= 1, "Gpt2Decoder::append: needs at least one token");
  MT_CHECK(length_ + n <= config_.ctx, "Gpt2Decoder::append: ", n, " tokens at position ", length_,
           " run past the context length ", config_.ctx,
           "; reset() and encode at most ctx tokens to go on");
  int32_t* ids = ids_.data<int32_t>();
  for (int64_t i = 0; i < n; ++i) {
    MT_CHECK(tokens[i] >= 0 && tokens[i] < config_.vocab, "Gpt2Decoder::append: token ", tokens[i],
             " outside the vocabulary [0, ", config_.vocab, ")");
    ids[i] = tokens[i];
  }
  // wte[tokens] + wpe[absolute positions]
  const Tensor x = x_.rows(0, n);
  ops::embedding_forward(x, ids_.rows(0, n), wte_, 0);
  ops::add(x, x, wpe_.rows(length_, n));
  for (Block& block : blocks_) run_block(block, n);
  length_ += n;
  // The head over the last row only: ln_f, then the tied LM head.
  const Tensor last = ln_.rows(0, 1);
  ops::layernorm_forward(last, mean_.rows(0, 1), rstd_.rows(0, 1), x_.rows(n - 1, 1), ln_f_weight_,
                         ln_f_bias_, kLayerNormEps);
  ops::matmul(logits_, last, wte_, false, true, 1.0f, 0.0f);
  return logits_.to_vector();
}

// r = x + c_proj(attention(c_attn(ln_1(x))));  out = r + mlp(ln_2(r)), in place in x_.
void Gpt2Decoder::run_block(Block& b, int64_t n) {
  const Tensor x = x_.rows(0, n), ln = ln_.rows(0, n), mean = mean_.rows(0, n),
               rstd = rstd_.rows(0, n), proj = proj_.rows(0, n);
  ops::layernorm_forward(ln, mean, rstd, x, b.ln_1_weight, b.ln_1_bias, kLayerNormEps);
  ops::linear_forward(qkv_.rows(0, n), ln, b.attn_weight, b.attn_bias);
  attend(b, n);
  ops::linear_forward(proj, att_.rows(0, n), b.attn_proj_weight, b.attn_proj_bias);
  ops::add(x, proj, x);
  ops::layernorm_forward(ln, mean, rstd, x, b.ln_2_weight, b.ln_2_bias, kLayerNormEps);
  ops::linear_forward(fc_.rows(0, n), ln, b.fc_weight, b.fc_bias);
  ops::gelu_forward(gelu_.rows(0, n), fc_.rows(0, n));
  ops::linear_forward(proj, gelu_.rows(0, n), b.mlp_proj_weight, b.mlp_proj_bias);
  ops::add(x, proj, x);
}

void Gpt2Decoder::attend(Block& b, int64_t n) {
  const int64_t c = config_.dim, hd = config_.head_dim(), ctx = config_.ctx;
  const int64_t seen = length_ + n;  // keys each new row may see, at most
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const float* qkv = qkv_.data<float>();
  float* att = att_.data<float>();
  float* q = q_head_.data<float>();
  const Tensor scores = scores_.view(0, {n, seen}), out = out_head_.rows(0, n);
  for (int64_t h = 0; h < config_.heads; ++h) {
    // Rows i of qkv hold q | k | v; head h is the column slice [h hd, (h + 1) hd) of each.
    float* keys = b.keys.data<float>() + (h * ctx + length_) * hd;
    float* values = b.values.data<float>() + (h * ctx + length_) * hd;
    for (int64_t i = 0; i < n; ++i) {
      const float* row = qkv + i * 3 * c + h * hd;
      std::copy_n(row, hd, q + i * hd);
      std::copy_n(row + c, hd, keys + i * hd);
      std::copy_n(row + 2 * c, hd, values + i * hd);
    }
    const Tensor head_keys = b.keys.view(h * ctx * hd, {seen, hd});
    const Tensor head_values = b.values.view(h * ctx * hd, {seen, hd});
    ops::matmul(scores, q_head_.rows(0, n), head_keys, false, true, scale, 0.0f);
    float* s = scores.data<float>();
    for (int64_t i = 0; i < n; ++i) causal_softmax_row(s + i * seen, length_ + i + 1, seen);
    ops::matmul(out, scores, head_values, false, false, 1.0f, 0.0f);
    const float* o = out.data<float>();
    for (int64_t i = 0; i < n; ++i) std::copy_n(o + i * hd, hd, att + i * c + h * hd);
  }
}

}  // namespace meshtrain
