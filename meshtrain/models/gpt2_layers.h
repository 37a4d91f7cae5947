// GPT-2's layers, composed of the building blocks in parallel/nn. Hidden states between layers
// are token rows [rows, d] (b * T rows, or this rank's share under sequence parallelism).
//   Gpt2Embedding: wte[tokens] + wpe[positions]
//   Gpt2Block:     r = x + c_proj(attention(c_attn(ln_1(x))));  out = r + mlp(ln_2(r))  (pre-LN)
//   Gpt2Head:      ln_f, the tied LM head and the cross-entropy of the targets
#pragma once

#include <string>

#include "meshtrain/models/lm_head_layer.h"
#include "meshtrain/parallel/model.h"
#include "meshtrain/parallel/nn/attention.h"
#include "meshtrain/parallel/nn/embedding.h"
#include "meshtrain/parallel/nn/layer_norm.h"
#include "meshtrain/parallel/nn/mlp.h"

namespace meshtrain {

class Gpt2Embedding : public Layer {
 public:
  Gpt2Embedding(Parameter* wte, Parameter* wpe) : wte_(wte), wpe_(wpe) {}
  std::string name() const override { return "embedding"; }
  std::vector<Parameter*> parameters() override;
  // Reads mb.tokens i32 [b, T] (T <= ctx), writes mb.hidden.
  void forward(MicroBatch& mb, int layer_index) override;
  // The tokens have no gradient: mb.hidden is left undefined.
  void backward(MicroBatch& mb, int layer_index) override;
  void add_modules(std::vector<nn::NamedModule>& out) override;
  Shape hidden_shape(const MicroBatch& mb) override;  // of its output

 private:
  nn::Embedding wte_;
  nn::PositionEmbedding wpe_;
};

struct BlockParameters {
  Parameter* ln_1_weight;
  Parameter* ln_1_bias;
  Parameter* attn_weight;  // c_attn [d, 3d]: q | k | v
  Parameter* attn_bias;
  Parameter* attn_proj_weight;  // attn.c_proj [d, d]
  Parameter* attn_proj_bias;
  Parameter* ln_2_weight;
  Parameter* ln_2_bias;
  Parameter* fc_weight;  // mlp.c_fc [d, 4d]
  Parameter* fc_bias;
  Parameter* mlp_proj_weight;  // mlp.c_proj [4d, d]
  Parameter* mlp_proj_bias;
};

class Gpt2Block : public Layer {
 public:
  Gpt2Block(std::string name, int heads, const BlockParameters& p);
  std::string name() const override { return name_; }
  std::vector<Parameter*> parameters() override;
  void forward(MicroBatch& mb, int layer_index) override;
  void backward(MicroBatch& mb, int layer_index) override;
  // Defers the four linears' weight gradients.
  void backward_input(MicroBatch& mb, int layer_index) override;
  void backward_weight(MicroBatch& mb, int layer_index) override;
  void add_modules(std::vector<nn::NamedModule>& out) override;
  Shape hidden_shape(const MicroBatch& mb) override;

 private:
  void run_backward(MicroBatch& mb, int layer_index, Tape* deferred);

  std::string name_;
  nn::LayerNorm ln_1_;
  nn::Linear c_attn_;
  nn::Attention attn_;
  nn::Linear attn_proj_;
  nn::LayerNorm ln_2_;
  nn::Mlp mlp_;
};

using Gpt2Head = LmHeadLayer<nn::LayerNorm>;

}  // namespace meshtrain
