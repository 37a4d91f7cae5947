#include "meshtrain/models/llama_init.h"

#include <algorithm>
#include <cmath>
#include <string_view>

#include "meshtrain/core/error.h"
#include "meshtrain/mesh/box_runs.h"
#include "meshtrain/models/rng.h"

namespace meshtrain {

namespace {
enum class Rule { ones, normal, residual_normal, unknown };

// The rule for a Hugging Face Llama parameter name.
Rule rule_of(std::string_view name) {
  if (name == "model.embed_tokens.weight" || name == "lm_head.weight") return Rule::normal;
  if (name == "model.norm.weight") return Rule::ones;
  constexpr std::string_view kLayers = "model.layers.";
  if (!name.starts_with(kLayers)) return Rule::unknown;
  const std::string_view rest = name.substr(kLayers.size());
  const size_t dot = rest.find('.');
  if (dot == std::string_view::npos || dot == 0 ||
      rest.substr(0, dot).find_first_not_of("0123456789") != std::string_view::npos)
    return Rule::unknown;
  const std::string_view local = rest.substr(dot + 1);
  if (local == "input_layernorm.weight" || local == "post_attention_layernorm.weight")
    return Rule::ones;
  if (local == "self_attn.q_proj.weight" || local == "self_attn.k_proj.weight" ||
      local == "self_attn.v_proj.weight" || local == "mlp.gate_proj.weight" ||
      local == "mlp.up_proj.weight")
    return Rule::normal;
  if (local == "self_attn.o_proj.weight" || local == "mlp.down_proj.weight")
    return Rule::residual_normal;
  return Rule::unknown;
}
}  // namespace

void LlamaInitValues::read(const Parameter& p, const std::vector<LocalPiece>& pieces,
                           const Tensor& local) const {
  MT_CHECK(local.dtype() == DType::f32, "parameter '", p.name(), "' initialises as f32, got ",
           local.describe());
  const Rule rule = rule_of(p.name());
  MT_CHECK(rule != Rule::unknown, "'", p.name(), "' is not a Llama parameter name");
  const float stddev = rule == Rule::residual_normal
                           ? 0.02f / std::sqrt(2.0f * static_cast<float>(config_.layers))
                           : 0.02f;
  const uint64_t stream = fnv1a64(p.name());
  fill_from_boxes(local, pieces, [&](const TensorSlice& box, const Tensor& out) {
    float* data = out.data<float>();
    for_each_box_run(p.global_shape(), box, [&](int64_t at, int64_t in_box, int64_t n) {
      if (rule == Rule::ones)
        std::fill(data + in_box, data + in_box + n, 1.0f);
      else
        fill_normal(data + in_box, n, seed_, stream, at, stddev);
    });
  });
}

}  // namespace meshtrain
