#include "meshtrain/models/llama_config.h"

#include <cmath>
#include <utility>

#include "meshtrain/core/error.h"

namespace meshtrain {

namespace {
// Meta's published shapes (the config.json of each Hugging Face release). Llama 3.2 ships with
// rope_scaling for its 128k context, which meshtrain does not model: its presets serve planning,
// where only the shapes matter.
const std::vector<std::pair<std::string, LlamaConfig>>& presets() {
  static const std::vector<std::pair<std::string, LlamaConfig>> table = {
      {"llama3-8b", {128256, 8192, 4096, 14336, 32, 32, 8, 500000, 1e-5, false}},
      {"llama3-70b", {128256, 8192, 8192, 28672, 80, 64, 8, 500000, 1e-5, false}},
      {"llama3.2-1b", {128256, 131072, 2048, 8192, 16, 32, 8, 500000, 1e-5, true}},
      {"llama3.2-3b", {128256, 131072, 3072, 8192, 28, 24, 8, 500000, 1e-5, true}},
      {"llama-tiny", {64, 16, 32, 64, 2, 4, 2, 10000, 1e-5, false}},
      {"llama-demo", {256, 64, 128, 352, 4, 4, 2, 10000, 1e-5, false}},
  };
  return table;
}
}  // namespace

void LlamaConfig::validate() const {
  MT_CHECK(vocab >= 1, "LlamaConfig: vocab must be >= 1, got ", vocab);
  MT_CHECK(ctx >= 1, "LlamaConfig: ctx (the longest sequence) must be >= 1, got ", ctx);
  MT_CHECK(dim >= 1, "LlamaConfig: dim must be >= 1, got ", dim);
  MT_CHECK(ffn_dim >= 1, "LlamaConfig: ffn_dim must be >= 1, got ", ffn_dim);
  MT_CHECK(layers >= 1, "LlamaConfig: layers must be >= 1, got ", layers);
  MT_CHECK(heads >= 1, "LlamaConfig: heads must be >= 1, got ", heads);
  MT_CHECK(kv_heads >= 1, "LlamaConfig: kv_heads must be >= 1, got ", kv_heads);
  MT_CHECK(dim % heads == 0, "LlamaConfig: heads must divide dim, got dim = ", dim,
           " and heads = ", heads);
  MT_CHECK(heads % kv_heads == 0, "LlamaConfig: kv_heads must divide heads, got heads = ", heads,
           " and kv_heads = ", kv_heads);
  MT_CHECK(head_dim() % 2 == 0,
           "LlamaConfig: the head dimension dim / heads must be even for "
           "rotary embeddings, got ",
           dim, " / ", heads, " = ", head_dim());
  MT_CHECK(std::isfinite(rope_theta) && rope_theta > 0, "LlamaConfig: rope_theta must be > 0, got ",
           rope_theta);
  MT_CHECK(std::isfinite(rms_norm_eps) && rms_norm_eps >= 0,
           "LlamaConfig: rms_norm_eps must be >= 0, got ", rms_norm_eps);
  // Token ids travel as i32; sizes are multiplied into element counts: bound them so that no
  // count overflows.
  MT_CHECK(vocab <= (int64_t{1} << 30), "LlamaConfig: vocab must be <= 2^30, got ", vocab);
  MT_CHECK(ctx <= (int64_t{1} << 20), "LlamaConfig: ctx must be <= 1048576, got ", ctx);
  MT_CHECK(dim <= (int64_t{1} << 16), "LlamaConfig: dim must be <= 65536, got ", dim);
  MT_CHECK(ffn_dim <= (int64_t{1} << 18), "LlamaConfig: ffn_dim must be <= 262144, got ", ffn_dim);
  MT_CHECK(layers <= 4096, "LlamaConfig: layers must be <= 4096, got ", layers);
}

int64_t LlamaConfig::num_parameters() const {
  const int64_t d = dim, kv = kv_heads * head_dim();
  const int64_t per_block = 2 * d + d * d + 2 * d * kv + d * d + 3 * d * ffn_dim;
  return vocab * d * (tie_embeddings ? 1 : 2) + layers * per_block + d;
}

std::string LlamaConfig::describe() const {
  return detail::concat("V=", vocab, " T=", ctx, " d=", dim, " ffn=", ffn_dim, " L=", layers,
                        " H=", heads, " KV=", kv_heads, tie_embeddings ? " tied" : "");
}

LlamaConfig llama_preset(std::string_view name) {
  for (const auto& [preset, config] : presets())
    if (preset == name) return config;
  std::string known;
  for (const auto& [preset, config] : presets()) known += (known.empty() ? "" : ", ") + preset;
  throw InvalidArgument(detail::concat("unknown Llama preset '", name, "'; known: ", known));
}

std::vector<std::string> llama_preset_names() {
  std::vector<std::string> names;
  for (const auto& [preset, config] : presets()) names.push_back(preset);
  return names;
}

}  // namespace meshtrain
