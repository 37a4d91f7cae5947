#include "meshtrain/models/gpt2_layers.h"

#include "meshtrain/core/error.h"
#include "meshtrain/core/ops/ops.h"
#include "meshtrain/models/layer_checks.h"

namespace meshtrain {

std::vector<Parameter*> Gpt2Embedding::parameters() {
  return concat({wte_.parameters(), wpe_.parameters()});
}

void Gpt2Embedding::forward(MicroBatch& mb, int layer_index) {
  MemoryCategoryScope scope(MemoryCategory::activation);
  MT_CHECK(mb.tokens.defined() && mb.tokens.dtype() == DType::i32,
           "embedding: mb.tokens must be i32 [b, T], got ",
           mb.tokens.defined() ? mb.tokens.describe() : "undefined");
  const auto [batch, seq] = batch_and_seq(mb, name());
  Tensor hidden = wte_.forward(mb.tokens.flatten(), mb.tape(layer_index));
  wpe_.forward(hidden, wpe_.tp().local_rows(batch * seq).offset, seq);
  mb.hidden = hidden;
}

void Gpt2Embedding::backward(MicroBatch& mb, int layer_index) {
  MemoryCategoryScope scope(MemoryCategory::activation);
  Tape tape = mb.take(layer_index);
  expect_hidden(mb.hidden, name(), "the gradient of the output");
  const auto [batch, seq] = batch_and_seq(mb, name());
  wpe_.backward(mb.hidden, wpe_.tp().local_rows(batch * seq).offset, seq);
  wte_.backward(mb.hidden, tape);
  mb.hidden = Tensor();
}

Shape Gpt2Embedding::hidden_shape(const MicroBatch& mb) {
  const Parameter& wte = *wte_.parameters()[0];
  return token_rows(mb, wpe_.tp(), wte.global_shape()[1], name());
}

void Gpt2Embedding::add_modules(std::vector<nn::NamedModule>& out) {
  out.push_back({"wte", &wte_});
  out.push_back({"wpe", &wpe_});
}

Gpt2Block::Gpt2Block(std::string name, int heads, const BlockParameters& p)
    : name_(std::move(name)),
      ln_1_(p.ln_1_weight, p.ln_1_bias),
      c_attn_(p.attn_weight, p.attn_bias, /*out_blocks=*/3),
      attn_(heads),
      attn_proj_(p.attn_proj_weight, p.attn_proj_bias),
      ln_2_(p.ln_2_weight, p.ln_2_bias),
      mlp_(p.fc_weight, p.fc_bias, p.mlp_proj_weight, p.mlp_proj_bias) {}

std::vector<Parameter*> Gpt2Block::parameters() {
  return concat({ln_1_.parameters(), c_attn_.parameters(), attn_proj_.parameters(),
                 ln_2_.parameters(), mlp_.c_fc().parameters(), mlp_.c_proj().parameters()});
}

void Gpt2Block::forward(MicroBatch& mb, int layer_index) {
  MemoryCategoryScope scope(MemoryCategory::activation);
  expect_hidden(mb.hidden, name_, "the input");
  const auto [batch, seq] = batch_and_seq(mb, name_);
  Tape& tape = mb.tape(layer_index);
  const Tensor x = mb.hidden;
  const Tensor qkv = c_attn_.forward(ln_1_.forward(x, tape), tape);
  const Tensor resid = attn_proj_.forward(attn_.forward(qkv, batch, seq, tape), tape);
  ops::add(resid, resid, x);
  const Tensor out = mlp_.forward(ln_2_.forward(resid, tape), tape);
  ops::add(out, out, resid);
  mb.hidden = out;
}

void Gpt2Block::backward(MicroBatch& mb, int layer_index) {
  run_backward(mb, layer_index, nullptr);
}

void Gpt2Block::backward_input(MicroBatch& mb, int layer_index) {
  run_backward(mb, layer_index, &mb.deferred[layer_index]);
}

void Gpt2Block::run_backward(MicroBatch& mb, int layer_index, Tape* deferred) {
  MemoryCategoryScope scope(MemoryCategory::activation);
  expect_hidden(mb.hidden, name_, "the gradient of the output");
  Tape tape = mb.take(layer_index);
  const Tensor d_out = mb.hidden;
  const Tensor d_resid = ln_2_.backward(mlp_.backward(d_out, tape, deferred), tape);
  ops::add(d_resid, d_resid, d_out);
  const Tensor d_qkv = attn_.backward(attn_proj_.backward(d_resid, tape, deferred), tape);
  const Tensor d_in = ln_1_.backward(c_attn_.backward(d_qkv, tape, deferred), tape);
  ops::add(d_in, d_in, d_resid);
  mb.hidden = d_in;
}

void Gpt2Block::backward_weight(MicroBatch& mb, int layer_index) {
  MemoryCategoryScope scope(MemoryCategory::activation);
  Tape deferred = mb.take_deferred(layer_index);  // pushed mlp.c_proj, mlp.c_fc, c_proj, c_attn
  c_attn_.backward_weight(deferred);
  attn_proj_.backward_weight(deferred);
  mlp_.backward_weight(deferred);
}

Shape Gpt2Block::hidden_shape(const MicroBatch& mb) {
  return token_rows(mb, ln_1_.tp(), ln_1_.parameters()[0]->global_shape()[0], name_);
}

void Gpt2Block::add_modules(std::vector<nn::NamedModule>& out) {
  out.push_back({name_ + ".ln_1", &ln_1_});
  out.push_back({name_ + ".attn.c_attn", &c_attn_});
  out.push_back({name_ + ".attn", &attn_});
  out.push_back({name_ + ".attn.c_proj", &attn_proj_});
  out.push_back({name_ + ".ln_2", &ln_2_});
  out.push_back({name_ + ".mlp.c_fc", &mlp_.c_fc()});
  out.push_back({name_ + ".mlp.c_proj", &mlp_.c_proj()});
}

}  // namespace meshtrain
