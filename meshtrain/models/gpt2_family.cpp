#include "meshtrain/models/gpt2_family.h"

#include <charconv>
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "meshtrain/core/error.h"
#include "meshtrain/models/checkpoint.h"
#include "meshtrain/models/gpt2.h"
#include "meshtrain/models/gpt2_decoder.h"
#include "meshtrain/models/gpt2_init.h"
#include "meshtrain/models/hf_config_json.h"
#include "meshtrain/models/hf_config_path.h"
#include "meshtrain/models/safetensors_set.h"

namespace meshtrain {

namespace {

class Gpt2Spec : public ModelSpec {
 public:
  explicit Gpt2Spec(const GPT2Config& config) : config_(config) { config_.validate(); }

  std::string family() const override { return "gpt2"; }
  TextOptions options() const override {
    return {{"vocab", std::to_string(config_.vocab)}, {"ctx", std::to_string(config_.ctx)},
            {"dim", std::to_string(config_.dim)},     {"layers", std::to_string(config_.layers)},
            {"heads", std::to_string(config_.heads)}};
  }
  std::string describe() const override { return "GPT-2 " + config_.describe(); }
  int64_t vocab() const override { return config_.vocab; }
  int64_t max_seq() const override { return config_.ctx; }
  int64_t num_parameters() const override { return config_.num_parameters(); }
  double training_flops(double tokens, int64_t seq) const override {
    // 6 N per token (forward 2, backward 4; wpe, biases and LayerNorms included) plus
    // attention's QK^T and PV over the full T x T (no causal saving): 12 L T d per token.
    // Softmax, GELU, LayerNorm, cross-entropy and AdamW are not counted.
    return 6.0 * static_cast<double>(config_.num_parameters()) * tokens +
           12.0 * static_cast<double>(config_.layers) * static_cast<double>(seq) *
               static_cast<double>(config_.dim) * tokens;
  }
  std::unique_ptr<Model> build(Device device) const override {
    return std::make_unique<GPT2>(config_, GPT2Options{.device = device, .materialize = false});
  }
  std::unique_ptr<ParameterSource> init_values(uint64_t seed) const override {
    return std::make_unique<Gpt2InitValues>(config_, seed);
  }
  std::map<std::string, std::string> safetensors_metadata() const override {
    return {{"heads", std::to_string(config_.heads)}};
  }
  std::string hf_config() const override {
    // transformers' GPT2Config: no dropout (meshtrain trains without it), GELU's tanh form
    // ("gelu_new"), LayerNorm eps 1e-5, the head tied to wte, the MLP 4d wide (n_inner null).
    const nlohmann::ordered_json config = {
        {"architectures", {"GPT2LMHeadModel"}},
        {"model_type", "gpt2"},
        {"vocab_size", config_.vocab},
        {"n_positions", config_.ctx},
        {"n_ctx", config_.ctx},
        {"n_embd", config_.dim},
        {"n_layer", config_.layers},
        {"n_head", config_.heads},
        {"n_inner", nullptr},
        {"activation_function", "gelu_new"},
        {"layer_norm_epsilon", 1e-5},
        {"resid_pdrop", 0.0},
        {"embd_pdrop", 0.0},
        {"attn_pdrop", 0.0},
        {"initializer_range", 0.02},
        {"tie_word_embeddings", true},
        {"torch_dtype", "float32"}};
    return config.dump(2) + "\n";
  }
  const GPT2Config& config() const { return config_; }
  std::unique_ptr<Decoder> decoder(Model& whole) const override {
    auto* gpt2 = dynamic_cast<GPT2*>(&whole);
    MT_CHECK(gpt2 != nullptr, "the GPT-2 decoder needs a model its spec built");
    return std::make_unique<Gpt2Decoder>(*gpt2);
  }

 private:
  GPT2Config config_;
};

// What the config.json beside a GPT-2 file (hf_config) says: its options by meshtrain's names,
// none without such a file; an error when it is not GPT-2's or does not parse.
TextOptions read_gpt2_config_json(const std::string& path, const std::string& safetensors_path) {
  if (!std::filesystem::exists(path)) return {};
  return hf_integer_options(read_hf_config(path, "gpt2", "GPT-2", safetensors_path), path,
                            {{"vocab_size", "vocab"}, {"n_positions", "ctx"}, {"n_embd", "dim"},
                             {"n_layer", "layers"}, {"n_head", "heads"}});
}

// The configuration a Hugging Face GPT-2 file gives: V and d from wte, T from wpe, L from the
// blocks, H from the config.json beside it or the metadata --save writes; the two must agree with
// the shapes.
std::optional<TextOptions> read_gpt2_safetensors(const std::string& path) {
  const SafetensorsSet reader(path);  // one file, or the shards of an index
  TextOptions out;
  std::set<int64_t> blocks;
  for (const SafetensorsEntry& e : reader.entries()) {
    const auto name = checkpoint_parameter_name(e.name);
    if (!name) continue;
    if (*name == "wte.weight" && e.shape.size() == 2) {
      out["vocab"] = std::to_string(e.shape[0]);
      out["dim"] = std::to_string(e.shape[1]);
    } else if (*name == "wpe.weight" && e.shape.size() == 2) {
      out["ctx"] = std::to_string(e.shape[0]);
    } else if (name->rfind("h.", 0) == 0) {
      const char* end = name->data() + name->size();
      int64_t block = -1;
      const auto [ptr, ec] = std::from_chars(name->data() + 2, end, block);
      if (ec != std::errc() || ptr == end || *ptr != '.' || block < 0)
        throw InvalidArgument(detail::concat("'", path, "': key '", e.name,
                                             "' is not h.<block>.<name>"));
      blocks.insert(block);
    }
  }
  if (!out.count("vocab") || !out.count("ctx")) return std::nullopt;  // no GPT-2 embeddings
  const int64_t layers = static_cast<int64_t>(blocks.size());
  if (!blocks.empty() && *blocks.rbegin() != layers - 1)
    throw InvalidArgument(detail::concat("'", path, "' has blocks up to h.", *blocks.rbegin(),
                                         " but only ", layers, " of them; expected h.0 to h.",
                                         layers - 1));
  out["layers"] = std::to_string(layers);
  if (const auto heads = reader.metadata().find("heads"); heads != reader.metadata().end())
    out["heads"] = heads->second;
  const std::string config = hf_config_path(path);
  for (const auto& [option, value] : read_gpt2_config_json(config, path)) {
    const auto [held, added] = out.emplace(option, value);
    MT_CHECK(added || held->second == value, "'", config, "' gives ", option, " ",
             value, ", but '", path, "' holds ", option, " ", held->second);
  }
  return out;
}

TextOptions preset_options(const GPT2Config& config) { return Gpt2Spec(config).options(); }

GPT2Config config_of(const OptionValues& v) {
  return GPT2Config{.vocab = v.integer("vocab"),
                    .ctx = v.integer("ctx"),
                    .dim = v.integer("dim"),
                    .layers = v.integer("layers"),
                    .heads = v.integer("heads")};
}

}  // namespace

ModelSpecPtr gpt2_model(const GPT2Config& config) { return std::make_shared<Gpt2Spec>(config); }

GPT2Config gpt2_config(const ModelSpec& model) {
  const auto* gpt2 = dynamic_cast<const Gpt2Spec*>(&model);
  MT_CHECK(gpt2 != nullptr, "expected a GPT-2 model, got ", model.describe());
  return gpt2->config();
}

ModelFamily gpt2_family() {
  const auto size = [](std::string name, std::string help) {
    return OptionSpec{.name = name, .type = OptionSpec::Type::integer, .help = std::move(help),
                      .minimum = 1, .flag = "--" + name};
  };
  ModelFamily family{
      .name = "gpt2",
      .help = "GPT-2 (LayerNorm, learned positions, GELU MLP, tied head); Hugging Face names",
      .options = {size("vocab", "vocabulary size (V)"),
                  size("ctx", "context length (T): rows of the position embedding"),
                  size("dim", "model width (d)"),
                  size("layers", "transformer blocks (L)"),
                  size("heads", "attention heads (H), dividing --dim")},
      .presets = {},
      .factory = [](const OptionValues& v) { return gpt2_model(config_of(v)); },
      .read_safetensors = read_gpt2_safetensors};
  for (const std::string& name : gpt2_preset_names())
    family.presets[name] = preset_options(gpt2_preset(name));
  return family;
}

}  // namespace meshtrain
