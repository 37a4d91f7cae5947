#include "meshtrain/models/gpt2_init.h"

#include <algorithm>
#include <cmath>

#include "meshtrain/core/error.h"
#include "meshtrain/mesh/box_runs.h"
#include "meshtrain/models/rng.h"

namespace meshtrain {

namespace {
enum class Rule { ones, zeros, normal, residual_normal, unknown };

// The rule for a Hugging Face GPT-2 parameter name ("h.{i}." names a block's parameter).
Rule rule_of(std::string_view name) {
  if (name == "wte.weight" || name == "wpe.weight") return Rule::normal;
  if (name == "ln_f.weight") return Rule::ones;
  if (name == "ln_f.bias") return Rule::zeros;
  if (!name.starts_with("h.")) return Rule::unknown;
  const size_t dot = name.find('.', 2);
  if (dot == std::string_view::npos || dot == 2 ||
      name.substr(2, dot - 2).find_first_not_of("0123456789") != std::string_view::npos)
    return Rule::unknown;
  const std::string_view local = name.substr(dot + 1);
  if (local == "ln_1.weight" || local == "ln_2.weight") return Rule::ones;
  if (local == "ln_1.bias" || local == "ln_2.bias" || local == "attn.c_attn.bias" ||
      local == "attn.c_proj.bias" || local == "mlp.c_fc.bias" || local == "mlp.c_proj.bias")
    return Rule::zeros;
  if (local == "attn.c_attn.weight" || local == "mlp.c_fc.weight") return Rule::normal;
  if (local == "attn.c_proj.weight" || local == "mlp.c_proj.weight") return Rule::residual_normal;
  return Rule::unknown;
}
}  // namespace

void gpt2_init_values(const GPT2Config& config, std::string_view name, uint64_t seed,
                      int64_t offset, int64_t count, float* out) {
  MT_CHECK(offset >= 0 && count >= 0, "gpt2_init_values: bad range offset = ", offset,
           ", count = ", count);
  switch (rule_of(name)) {
    case Rule::ones:
      std::fill(out, out + count, 1.0f);
      return;
    case Rule::zeros:
      std::fill(out, out + count, 0.0f);
      return;
    case Rule::normal:
      fill_normal(out, count, seed, fnv1a64(name), offset, 0.02f);
      return;
    case Rule::residual_normal:
      fill_normal(out, count, seed, fnv1a64(name), offset,
                  0.02f / std::sqrt(2.0f * static_cast<float>(config.layers)));
      return;
    case Rule::unknown:
      break;
  }
  throw InvalidArgument(
      detail::concat("gpt2_init_values: '", name, "' is not a GPT-2 parameter name"));
}

void Gpt2InitValues::read(const Parameter& p, const std::vector<LocalPiece>& pieces,
                          const Tensor& local) const {
  MT_CHECK(local.dtype() == DType::f32, "parameter '", p.name(), "' initialises as f32, got ",
           local.describe());
  fill_from_boxes(local, pieces, [&](const TensorSlice& box, const Tensor& out) {
    float* data = out.data<float>();
    for_each_box_run(p.global_shape(), box, [&](int64_t at, int64_t in_box, int64_t n) {
      gpt2_init_values(config_, p.name(), seed_, at, n, data + in_box);
    });
  });
}

}  // namespace meshtrain
