// Llama's layers, composed of the building blocks in parallel/nn. Hidden states between layers
// are token rows [rows, d] (b * T rows, or this rank's share under sequence parallelism).
//   LlamaEmbedding: embed_tokens[tokens] (positions enter through the rotary embeddings)
//   LlamaBlock:     r = x + o_proj(attention(rope(q_proj(n)), rope(k_proj(n)), v_proj(n))),
//                   n = input_layernorm(x);  out = r + mlp(post_attention_layernorm(r))
//   LlamaHead:      model.norm, the LM head (lm_head, or embed_tokens when tied) and the
//                   cross-entropy of the targets
#pragma once

#include <string>

#include "meshtrain/models/lm_head_layer.h"
#include "meshtrain/parallel/model.h"
#include "meshtrain/parallel/nn/embedding.h"
#include "meshtrain/parallel/nn/gated_mlp.h"
#include "meshtrain/parallel/nn/grouped_attention.h"
#include "meshtrain/parallel/nn/linear.h"
#include "meshtrain/parallel/nn/rms_norm.h"

namespace meshtrain {

class LlamaEmbedding : public Layer {
 public:
  explicit LlamaEmbedding(Parameter* embed_tokens) : embed_tokens_(embed_tokens) {}
  std::string name() const override { return "embedding"; }
  std::vector<Parameter*> parameters() override { return embed_tokens_.parameters(); }
  // Reads mb.tokens i32 [b, T], writes mb.hidden.
  void forward(MicroBatch& mb, int layer_index) override;
  // The tokens have no gradient: mb.hidden is left undefined.
  void backward(MicroBatch& mb, int layer_index) override;
  void add_modules(std::vector<nn::NamedModule>& out) override;
  Shape hidden_shape(const MicroBatch& mb) override;  // of its output

 private:
  nn::Embedding embed_tokens_;
};

struct LlamaBlockParameters {
  Parameter* input_layernorm;           // [d]
  Parameter* q_proj;                    // [H * hd, d]
  Parameter* k_proj;                    // [KV * hd, d]
  Parameter* v_proj;                    // [KV * hd, d]
  Parameter* o_proj;                    // [d, H * hd]
  Parameter* post_attention_layernorm;  // [d]
  Parameter* gate_proj;                 // [ffn, d]
  Parameter* up_proj;                   // [ffn, d]
  Parameter* down_proj;                 // [d, ffn]
};

struct LlamaBlockShape {
  int heads;
  int kv_heads;
  float rope_theta;
  float rms_norm_eps;
};

class LlamaBlock : public Layer {
 public:
  // `name`: "model.layers.{i}", the prefix of its parameters and modules.
  LlamaBlock(std::string name, const LlamaBlockShape& shape, const LlamaBlockParameters& p);
  std::string name() const override { return name_; }
  std::vector<Parameter*> parameters() override;
  void forward(MicroBatch& mb, int layer_index) override;
  void backward(MicroBatch& mb, int layer_index) override;
  // Defers the seven linears' weight gradients.
  void backward_input(MicroBatch& mb, int layer_index) override;
  void backward_weight(MicroBatch& mb, int layer_index) override;
  void add_modules(std::vector<nn::NamedModule>& out) override;
  Shape hidden_shape(const MicroBatch& mb) override;

 private:
  void run_backward(MicroBatch& mb, int layer_index, Tape* deferred);

  std::string name_;
  nn::RmsNorm input_layernorm_;
  nn::Linear q_proj_;
  nn::Linear k_proj_;
  nn::Linear v_proj_;
  nn::GroupedAttention attn_;
  nn::Linear o_proj_;
  nn::RmsNorm post_attention_layernorm_;
  nn::GatedMlp mlp_;
};

using LlamaHead = LmHeadLayer<nn::RmsNorm>;

}  // namespace meshtrain
