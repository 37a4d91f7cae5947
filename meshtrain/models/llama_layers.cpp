#include "meshtrain/models/llama_layers.h"

#include "meshtrain/core/error.h"
#include "meshtrain/core/ops/ops.h"
#include "meshtrain/models/layer_checks.h"

namespace meshtrain {

void LlamaEmbedding::forward(MicroBatch& mb, int layer_index) {
  MemoryCategoryScope scope(MemoryCategory::activation);
  MT_CHECK(mb.tokens.defined() && mb.tokens.dtype() == DType::i32,
           "embedding: mb.tokens must be i32 [b, T], got ",
           mb.tokens.defined() ? mb.tokens.describe() : "undefined");
  batch_and_seq(mb, name());
  mb.hidden = embed_tokens_.forward(mb.tokens.flatten(), mb.tape(layer_index));
}

void LlamaEmbedding::backward(MicroBatch& mb, int layer_index) {
  MemoryCategoryScope scope(MemoryCategory::activation);
  Tape tape = mb.take(layer_index);
  expect_hidden(mb.hidden, name(), "the gradient of the output");
  embed_tokens_.backward(mb.hidden, tape);
  mb.hidden = Tensor();
}

Shape LlamaEmbedding::hidden_shape(const MicroBatch& mb) {
  const Parameter& table = *embed_tokens_.parameters()[0];
  return token_rows(mb, embed_tokens_.tp(), table.global_shape()[1], name());
}

void LlamaEmbedding::add_modules(std::vector<nn::NamedModule>& out) {
  out.push_back({"model.embed_tokens", &embed_tokens_});
}

LlamaBlock::LlamaBlock(std::string name, const LlamaBlockShape& shape,
                       const LlamaBlockParameters& p)
    : name_(std::move(name)),
      input_layernorm_(p.input_layernorm, shape.rms_norm_eps),
      q_proj_(p.q_proj, nullptr, 1, nn::WeightLayout::out_in),
      k_proj_(p.k_proj, nullptr, 1, nn::WeightLayout::out_in),
      v_proj_(p.v_proj, nullptr, 1, nn::WeightLayout::out_in),
      attn_(shape.heads, shape.kv_heads, shape.rope_theta),
      o_proj_(p.o_proj, nullptr, 1, nn::WeightLayout::out_in),
      post_attention_layernorm_(p.post_attention_layernorm, shape.rms_norm_eps),
      mlp_(p.gate_proj, p.up_proj, p.down_proj) {}

std::vector<Parameter*> LlamaBlock::parameters() {
  return concat({input_layernorm_.parameters(), q_proj_.parameters(), k_proj_.parameters(),
                 v_proj_.parameters(), o_proj_.parameters(), post_attention_layernorm_.parameters(),
                 mlp_.gate().parameters(), mlp_.up().parameters(), mlp_.down().parameters()});
}

void LlamaBlock::forward(MicroBatch& mb, int layer_index) {
  MemoryCategoryScope scope(MemoryCategory::activation);
  expect_hidden(mb.hidden, name_, "the input");
  const auto [batch, seq] = batch_and_seq(mb, name_);
  Tape& tape = mb.tape(layer_index);
  const Tensor x = mb.hidden;
  MT_ASSERT(q_proj_.enters_like(k_proj_) && q_proj_.enters_like(v_proj_),
            "q, k and v read one input, so they share a style");
  // q, k and v read the normalised input, entered into the tensor-parallel region once.
  const Tensor in = q_proj_.enter(input_layernorm_.forward(x, tape));
  const nn::QueryKeyValue qkv{q_proj_.forward_entered(in, tape), k_proj_.forward_entered(in, tape),
                              v_proj_.forward_entered(in, tape)};
  const Tensor resid = o_proj_.forward(attn_.forward(qkv, batch, seq, tape), tape);
  ops::add(resid, resid, x);
  const Tensor out = mlp_.forward(post_attention_layernorm_.forward(resid, tape), tape);
  ops::add(out, out, resid);
  mb.hidden = out;
}

void LlamaBlock::backward(MicroBatch& mb, int layer_index) {
  run_backward(mb, layer_index, nullptr);
}

void LlamaBlock::backward_input(MicroBatch& mb, int layer_index) {
  run_backward(mb, layer_index, &mb.deferred[layer_index]);
}

void LlamaBlock::run_backward(MicroBatch& mb, int layer_index, Tape* deferred) {
  MemoryCategoryScope scope(MemoryCategory::activation);
  expect_hidden(mb.hidden, name_, "the gradient of the output");
  Tape tape = mb.take(layer_index);
  const Tensor d_out = mb.hidden;
  const Tensor d_resid =
      post_attention_layernorm_.backward(mlp_.backward(d_out, tape, deferred), tape);
  ops::add(d_resid, d_resid, d_out);
  const nn::QueryKeyValue d_qkv = attn_.backward(o_proj_.backward(d_resid, tape, deferred), tape);
  // The three projections read one input: their gradients sum before leaving the region once.
  const Tensor d_in = v_proj_.backward_entered(d_qkv.v, tape, deferred);
  ops::add(d_in, d_in, k_proj_.backward_entered(d_qkv.k, tape, deferred));
  ops::add(d_in, d_in, q_proj_.backward_entered(d_qkv.q, tape, deferred));
  const Tensor d_x = input_layernorm_.backward(q_proj_.enter_backward(d_in), tape);
  ops::add(d_x, d_x, d_resid);
  mb.hidden = d_x;
}

void LlamaBlock::backward_weight(MicroBatch& mb, int layer_index) {
  MemoryCategoryScope scope(MemoryCategory::activation);
  // Deferred in backward's order (the MLP's, o_proj, v, k, q): taken back in reverse.
  Tape deferred = mb.take_deferred(layer_index);
  q_proj_.backward_weight(deferred);
  k_proj_.backward_weight(deferred);
  v_proj_.backward_weight(deferred);
  o_proj_.backward_weight(deferred);
  mlp_.backward_weight(deferred);
}

Shape LlamaBlock::hidden_shape(const MicroBatch& mb) {
  return token_rows(mb, input_layernorm_.tp(), input_layernorm_.parameters()[0]->global_shape()[0],
                    name_);
}

void LlamaBlock::add_modules(std::vector<nn::NamedModule>& out) {
  out.push_back({name_ + ".input_layernorm", &input_layernorm_});
  out.push_back({name_ + ".self_attn.q_proj", &q_proj_});
  out.push_back({name_ + ".self_attn.k_proj", &k_proj_});
  out.push_back({name_ + ".self_attn.v_proj", &v_proj_});
  out.push_back({name_ + ".self_attn", &attn_});
  out.push_back({name_ + ".self_attn.o_proj", &o_proj_});
  out.push_back({name_ + ".post_attention_layernorm", &post_attention_layernorm_});
  out.push_back({name_ + ".mlp.gate_proj", &mlp_.gate()});
  out.push_back({name_ + ".mlp.up_proj", &mlp_.up()});
  out.push_back({name_ + ".mlp.down_proj", &mlp_.down()});
}

}  // namespace meshtrain
