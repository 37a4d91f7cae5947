#include "meshtrain/models/gpt2_config.h"

#include <utility>

#include "meshtrain/core/error.h"

namespace meshtrain {

namespace {
const std::vector<std::pair<std::string, GPT2Config>>& presets() {
  static const std::vector<std::pair<std::string, GPT2Config>> table = {
      {"gpt2", {50257, 1024, 768, 12, 12}},
      {"gpt2-medium", {50257, 1024, 1024, 24, 16}},
      {"gpt2-large", {50257, 1024, 1280, 36, 20}},
      {"gpt2-xl", {50257, 1024, 1600, 48, 25}},
      {"tiny", {64, 16, 32, 2, 4}},
      {"demo", {256, 64, 128, 4, 4}},
  };
  return table;
}
}  // namespace

void GPT2Config::validate() const {
  MT_CHECK(vocab >= 1, "GPT2Config: vocab must be >= 1, got ", vocab);
  MT_CHECK(ctx >= 1, "GPT2Config: ctx (the context length) must be >= 1, got ", ctx);
  MT_CHECK(dim >= 1, "GPT2Config: dim must be >= 1, got ", dim);
  MT_CHECK(layers >= 1, "GPT2Config: layers must be >= 1, got ", layers);
  MT_CHECK(heads >= 1, "GPT2Config: heads must be >= 1, got ", heads);
  MT_CHECK(dim % heads == 0, "GPT2Config: heads must divide dim, got dim = ", dim,
           " and heads = ", heads);
  // Token ids travel as i32 and token files store uint16.
  MT_CHECK(vocab <= 65536, "GPT2Config: vocab must be <= 65536 (uint16 token files), got ", vocab);
  // Sizes are multiplied into element counts: bound them so that no count overflows.
  MT_CHECK(ctx <= (int64_t{1} << 20), "GPT2Config: ctx must be <= 1048576, got ", ctx);
  MT_CHECK(dim <= (int64_t{1} << 16), "GPT2Config: dim must be <= 65536, got ", dim);
  MT_CHECK(layers <= 4096, "GPT2Config: layers must be <= 4096, got ", layers);
}

int64_t GPT2Config::num_parameters() const {
  const int64_t d = dim;
  const int64_t per_block =
      2 * d + (d * 3 * d + 3 * d) + (d * d + d) + 2 * d + (d * 4 * d + 4 * d) + (4 * d * d + d);
  return vocab * d + ctx * d + layers * per_block + 2 * d;
}

std::string GPT2Config::describe() const {
  return detail::concat("V=", vocab, " T=", ctx, " d=", dim, " L=", layers, " H=", heads);
}

GPT2Config gpt2_preset(std::string_view name) {
  for (const auto& [preset, config] : presets())
    if (preset == name) return config;
  std::string known;
  for (const auto& [preset, config] : presets()) known += (known.empty() ? "" : ", ") + preset;
  throw InvalidArgument(detail::concat("unknown GPT-2 preset '", name, "'; known: ", known));
}

std::vector<std::string> gpt2_preset_names() {
  std::vector<std::string> names;
  for (const auto& [preset, config] : presets()) names.push_back(preset);
  return names;
}

}  // namespace meshtrain
