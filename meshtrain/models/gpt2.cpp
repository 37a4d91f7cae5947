#include "meshtrain/models/gpt2.h"

#include "meshtrain/core/error.h"
#include "meshtrain/models/gpt2_init.h"

namespace meshtrain {

GPT2::GPT2(const GPT2Config& config, const GPT2Options& options)
    : config_(config), device_(options.device) {
  config_.validate();
  const int64_t v = config_.vocab, t = config_.ctx, d = config_.dim;
  Parameter* wte = add_parameter("wte.weight", {v, d});
  Parameter* wpe = add_parameter("wpe.weight", {t, d});
  embedding_ = std::make_unique<Gpt2Embedding>(wte, wpe);
  for (int64_t i = 0; i < config_.layers; ++i) {
    const std::string h = "h." + std::to_string(i) + ".";
    BlockParameters p;
    p.ln_1_weight = add_parameter(h + "ln_1.weight", {d});
    p.ln_1_bias = add_parameter(h + "ln_1.bias", {d});
    p.attn_weight = add_parameter(h + "attn.c_attn.weight", {d, 3 * d});
    p.attn_bias = add_parameter(h + "attn.c_attn.bias", {3 * d});
    p.attn_proj_weight = add_parameter(h + "attn.c_proj.weight", {d, d});
    p.attn_proj_bias = add_parameter(h + "attn.c_proj.bias", {d});
    p.ln_2_weight = add_parameter(h + "ln_2.weight", {d});
    p.ln_2_bias = add_parameter(h + "ln_2.bias", {d});
    p.fc_weight = add_parameter(h + "mlp.c_fc.weight", {d, 4 * d});
    p.fc_bias = add_parameter(h + "mlp.c_fc.bias", {4 * d});
    p.mlp_proj_weight = add_parameter(h + "mlp.c_proj.weight", {4 * d, d});
    p.mlp_proj_bias = add_parameter(h + "mlp.c_proj.bias", {d});
    block_params_.push_back(p);
    blocks_.push_back(
        std::make_unique<Gpt2Block>("h." + std::to_string(i), static_cast<int>(config_.heads), p));
  }
  Parameter* ln_f_weight = add_parameter("ln_f.weight", {d});
  Parameter* ln_f_bias = add_parameter("ln_f.bias", {d});
  head_ = std::make_unique<Gpt2Head>(nn::LayerNorm(ln_f_weight, ln_f_bias), "ln_f", wte);

  if (!options.materialize) return;
  for (auto& p : params_) {
    {
      MemoryCategoryScope scope(MemoryCategory::param);
      p->set_value(Tensor::empty(p->shape(), p->dtype(), device_));
    }
    MemoryCategoryScope scope(MemoryCategory::grad);
    p->set_grad(Tensor::zeros(p->shape(), p->dtype(), device_));
  }
  init(options.seed);
}

Parameter* GPT2::add_parameter(std::string name, Shape shape) {
  params_.push_back(
      std::make_unique<Parameter>(std::move(name), std::move(shape), DType::f32, device_));
  return params_.back().get();
}

std::vector<Parameter*> GPT2::parameters() {
  std::vector<Parameter*> out;
  for (auto& p : params_) out.push_back(p.get());
  return out;
}

std::vector<Layer*> GPT2::layers() {
  std::vector<Layer*> out{embedding_.get()};
  for (auto& block : blocks_) out.push_back(block.get());
  out.push_back(head_.get());
  return out;
}

std::vector<UnitSpec> GPT2::default_units() {
  const int layers = static_cast<int>(config_.layers);
  std::vector<UnitSpec> units{{"root", {0, layers + 1}, /*root=*/true}};
  for (int i = 0; i < layers; ++i) units.push_back({"h." + std::to_string(i), {i + 1}});
  return units;
}

std::vector<nn::TpRule> GPT2::tensor_parallel_plan() {
  using nn::TpStyle;
  return {{"wte", TpStyle::vocab},           {"wpe", TpStyle::sequence},
          {"h.*.ln_1", TpStyle::sequence},   {"h.*.attn.c_attn", TpStyle::colwise},
          {"h.*.attn", TpStyle::heads},      {"h.*.attn.c_proj", TpStyle::rowwise},
          {"h.*.ln_2", TpStyle::sequence},   {"h.*.mlp.c_fc", TpStyle::colwise},
          {"h.*.mlp.c_proj", TpStyle::rowwise}, {"ln_f", TpStyle::sequence},
          {"lm_head", TpStyle::vocab}};
}

Parameter& GPT2::parameter(std::string_view name) {
  for (auto& p : params_)
    if (p->name() == name) return *p;
  throw InvalidArgument(
      detail::concat("GPT-2 (", config_.describe(), ") has no parameter '", name, "'"));
}

void GPT2::init(uint64_t seed) {
  MemoryCategoryScope scope(MemoryCategory::other);
  for (auto& p : params_) {
    const Tensor& value = p->value();
    MT_CHECK(p->shape() == p->global_shape(), "GPT2::init: parameter '", p->name(),
             "' is sharded already; initialise before applying tensor parallelism");
    MT_CHECK(value.dtype() == DType::f32, "GPT2::init: parameter '", p->name(),
             "' must be f32, got ", value.describe());
    Tensor host = value.device().is_cpu() ? value : Tensor::empty(value.shape());
    gpt2_init_values(config_, p->name(), seed, 0, host.numel(), host.data<float>());
    if (!value.device().is_cpu()) value.copy_from(host);
  }
}

}  // namespace meshtrain
