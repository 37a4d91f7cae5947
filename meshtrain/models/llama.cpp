#include "meshtrain/models/llama.h"

namespace meshtrain {

Llama::Llama(const LlamaConfig& config, Device device) : config_(config), device_(device) {
  config_.validate();
  const int64_t v = config_.vocab, d = config_.dim, ffn = config_.ffn_dim;
  const int64_t q = config_.heads * config_.head_dim(), kv = config_.kv_heads * config_.head_dim();
  Parameter* embed_tokens = add_parameter("model.embed_tokens.weight", {v, d});
  embedding_ = std::make_unique<LlamaEmbedding>(embed_tokens);
  const LlamaBlockShape shape{static_cast<int>(config_.heads), static_cast<int>(config_.kv_heads),
                              static_cast<float>(config_.rope_theta),
                              static_cast<float>(config_.rms_norm_eps)};
  for (int64_t i = 0; i < config_.layers; ++i) {
    const std::string name = "model.layers." + std::to_string(i);
    const std::string prefix = name + ".";
    LlamaBlockParameters p;
    p.input_layernorm = add_parameter(prefix + "input_layernorm.weight", {d});
    p.q_proj = add_parameter(prefix + "self_attn.q_proj.weight", {q, d});
    p.k_proj = add_parameter(prefix + "self_attn.k_proj.weight", {kv, d});
    p.v_proj = add_parameter(prefix + "self_attn.v_proj.weight", {kv, d});
    p.o_proj = add_parameter(prefix + "self_attn.o_proj.weight", {d, q});
    p.post_attention_layernorm = add_parameter(prefix + "post_attention_layernorm.weight", {d});
    p.gate_proj = add_parameter(prefix + "mlp.gate_proj.weight", {ffn, d});
    p.up_proj = add_parameter(prefix + "mlp.up_proj.weight", {ffn, d});
    p.down_proj = add_parameter(prefix + "mlp.down_proj.weight", {d, ffn});
    blocks_.push_back(std::make_unique<LlamaBlock>(name, shape, p));
  }
  Parameter* norm = add_parameter("model.norm.weight", {d});
  Parameter* lm_head =
      config_.tie_embeddings ? embed_tokens : add_parameter("lm_head.weight", {v, d});
  head_ = std::make_unique<LlamaHead>(nn::RmsNorm(norm, shape.rms_norm_eps), "model.norm", lm_head);
}

Parameter* Llama::add_parameter(std::string name, Shape shape) {
  params_.push_back(
      std::make_unique<Parameter>(std::move(name), std::move(shape), DType::f32, device_));
  return params_.back().get();
}

std::vector<Parameter*> Llama::parameters() {
  std::vector<Parameter*> out;
  for (auto& p : params_) out.push_back(p.get());
  return out;
}

std::vector<Layer*> Llama::layers() {
  std::vector<Layer*> out{embedding_.get()};
  for (auto& block : blocks_) out.push_back(block.get());
  out.push_back(head_.get());
  return out;
}

std::vector<UnitSpec> Llama::default_units() {
  const int layers = static_cast<int>(config_.layers);
  std::vector<UnitSpec> units{{"root", {0, layers + 1}, /*root=*/true}};
  for (int i = 0; i < layers; ++i) units.push_back({blocks_[i]->name(), {i + 1}});
  return units;
}

std::vector<nn::TpRule> Llama::tensor_parallel_plan() {
  using nn::TpStyle;
  const std::string block = "model.layers.*.";
  return {{"model.embed_tokens", TpStyle::vocab},
          {block + "input_layernorm", TpStyle::sequence},
          {block + "self_attn.q_proj", TpStyle::colwise},
          {block + "self_attn.k_proj", TpStyle::colwise},
          {block + "self_attn.v_proj", TpStyle::colwise},
          {block + "self_attn", TpStyle::heads},
          {block + "self_attn.o_proj", TpStyle::rowwise},
          {block + "post_attention_layernorm", TpStyle::sequence},
          {block + "mlp.gate_proj", TpStyle::colwise},
          {block + "mlp.up_proj", TpStyle::colwise},
          {block + "mlp.down_proj", TpStyle::rowwise},
          {"model.norm", TpStyle::sequence},
          {"lm_head", TpStyle::vocab}};
}

}  // namespace meshtrain
