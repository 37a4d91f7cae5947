#include "meshtrain/models/llama_family.h"

#include <charconv>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "meshtrain/core/error.h"
#include "meshtrain/models/hf_config_json.h"
#include "meshtrain/models/hf_config_path.h"
#include "meshtrain/models/llama.h"
#include "meshtrain/models/llama_decoder.h"
#include "meshtrain/models/llama_init.h"
#include "meshtrain/models/safetensors.h"
#include "meshtrain/models/safetensors_set.h"

namespace meshtrain {

namespace {

// The shortest text that reads back as the same double, so that options() round-trips.
std::string real_text(double value) {
  char text[32];
  return std::string(text, std::to_chars(text, text + sizeof text, value).ptr);
}

class LlamaSpec : public ModelSpec {
 public:
  explicit LlamaSpec(const LlamaConfig& config) : config_(config) { config_.validate(); }

  std::string family() const override { return "llama"; }
  TextOptions options() const override {
    return {{"vocab", std::to_string(config_.vocab)},
            {"ctx", std::to_string(config_.ctx)},
            {"dim", std::to_string(config_.dim)},
            {"ffn_dim", std::to_string(config_.ffn_dim)},
            {"layers", std::to_string(config_.layers)},
            {"heads", std::to_string(config_.heads)},
            {"kv_heads", std::to_string(config_.kv_heads)},
            {"rope_theta", real_text(config_.rope_theta)},
            {"rms_norm_eps", real_text(config_.rms_norm_eps)},
            {"tie_embeddings", config_.tie_embeddings ? "true" : "false"}};
  }
  std::string describe() const override { return "Llama " + config_.describe(); }
  int64_t vocab() const override { return config_.vocab; }
  int64_t max_seq() const override { return config_.ctx; }
  int64_t num_parameters() const override { return config_.num_parameters(); }
  double training_flops(double tokens, int64_t seq) const override {
    // 6 per parameter per token over the parameters that multiply (an untied embedding is a
    // lookup; a tied one is the head's GEMM), plus attention's QK^T and PV over the full T x T:
    // 12 L T (H hd) per token, as torchtitan counts. RMSNorm, RoPE, SwiGLU, softmax, the
    // cross-entropy and AdamW are not counted.
    const double embedding =
        config_.tie_embeddings ? 0.0 : static_cast<double>(config_.vocab * config_.dim);
    const double matmul_params = static_cast<double>(config_.num_parameters()) - embedding;
    return 6.0 * matmul_params * tokens + 12.0 * static_cast<double>(config_.layers) *
                                              static_cast<double>(seq) *
                                              static_cast<double>(config_.dim) * tokens;
  }
  std::unique_ptr<Model> build(Device device) const override {
    return std::make_unique<Llama>(config_, device);
  }
  std::unique_ptr<ParameterSource> init_values(uint64_t seed) const override {
    return std::make_unique<LlamaInitValues>(config_, seed);
  }
  std::string hf_config() const override {
    // transformers' LlamaConfig: SiLU-gated MLP, no biases, no dropout, no rope scaling.
    const nlohmann::ordered_json config = {{"architectures", {"LlamaForCausalLM"}},
                                           {"model_type", "llama"},
                                           {"vocab_size", config_.vocab},
                                           {"max_position_embeddings", config_.ctx},
                                           {"hidden_size", config_.dim},
                                           {"intermediate_size", config_.ffn_dim},
                                           {"num_hidden_layers", config_.layers},
                                           {"num_attention_heads", config_.heads},
                                           {"num_key_value_heads", config_.kv_heads},
                                           {"head_dim", config_.head_dim()},
                                           {"hidden_act", "silu"},
                                           {"rms_norm_eps", config_.rms_norm_eps},
                                           {"rope_theta", config_.rope_theta},
                                           {"rope_scaling", nullptr},
                                           {"attention_bias", false},
                                           {"attention_dropout", 0.0},
                                           {"mlp_bias", false},
                                           {"initializer_range", 0.02},
                                           {"tie_word_embeddings", config_.tie_embeddings},
                                           {"torch_dtype", "float32"}};
    return config.dump(2) + "\n";
  }
  const LlamaConfig& config() const { return config_; }
  std::unique_ptr<Decoder> decoder(Model& whole) const override {
    auto* llama = dynamic_cast<Llama*>(&whole);
    MT_CHECK(llama != nullptr, "the Llama decoder needs a model its spec built");
    return std::make_unique<LlamaDecoder>(*llama);
  }

 private:
  LlamaConfig config_;
};

// The options transformers' config.json of a Llama gives, by meshtrain's names. Options it leaves
// out take LlamaConfig's defaults in transformers (num_key_value_heads = num_attention_heads,
// rope_theta 10000, rms_norm_eps 1e-6, untied); what meshtrain does not model is refused by name.
TextOptions read_llama_config_json(const std::string& path, const std::string& tensors_path) {
  const nlohmann::json config = read_hf_config(path, "llama", "Llama", tensors_path);
  const auto refuse_unless = [&](const char* key, const nlohmann::json& supported,
                                 const char* what) {
    MT_CHECK(!config.contains(key) || config[key] == supported || config[key].is_null(), "'", path,
             "': ", key, " ", config.contains(key) ? config[key].dump() : "",
             " is not supported; meshtrain's Llama has ", what);
  };
  refuse_unless("rope_scaling", nullptr, "no rope scaling (rope_scaling null)");
  refuse_unless("hidden_act", "silu", "a SiLU-gated MLP (hidden_act \"silu\")");
  refuse_unless("attention_bias", false, "no attention biases (attention_bias false)");
  refuse_unless("mlp_bias", false, "no MLP biases (mlp_bias false)");
  const auto real = [&](const char* key, double fallback) {
    if (!config.contains(key)) return fallback;
    MT_CHECK(config[key].is_number(), "'", path, "': ", key, " must be a number, got ",
             config[key].dump());
    return config[key].get<double>();
  };
  TextOptions out = hf_integer_options(config, path,
                                       {{"vocab_size", "vocab"},
                                        {"max_position_embeddings", "ctx"},
                                        {"hidden_size", "dim"},
                                        {"intermediate_size", "ffn_dim"},
                                        {"num_hidden_layers", "layers"},
                                        {"num_attention_heads", "heads"},
                                        {"num_key_value_heads", "kv_heads"}});
  if (!out.count("kv_heads") && out.count("heads")) out["kv_heads"] = out["heads"];
  const TextOptions head_dim = hf_integer_options(config, path, {{"head_dim", "head_dim"}});
  if (head_dim.count("head_dim") && out.count("dim") && out.count("heads")) {
    // Checked here, before it divides: 0 would end the process (SIGFPE).
    const int64_t heads = std::stoll(out["heads"]);
    MT_CHECK(heads >= 1, "'", path, "': num_attention_heads must be at least 1, got ", heads);
    const int64_t given = std::stoll(head_dim.at("head_dim"));
    const int64_t derived = std::stoll(out["dim"]) / heads;
    MT_CHECK(given == derived, "'", path, "': head_dim ", given,
             " is not hidden_size / num_attention_heads = ", derived,
             "; meshtrain's Llama derives it so");
  }
  out["rope_theta"] = real_text(real("rope_theta", 10000.0));
  out["rms_norm_eps"] = real_text(real("rms_norm_eps", 1e-6));
  if (config.contains("tie_word_embeddings")) {
    MT_CHECK(config["tie_word_embeddings"].is_boolean(), "'", path,
             "': tie_word_embeddings must be true or false, got ",
             config["tie_word_embeddings"].dump());
    out["tie_embeddings"] = config["tie_word_embeddings"].get<bool>() ? "true" : "false";
  } else {
    out["tie_embeddings"] = "false";
  }
  return out;
}

// A Hugging Face Llama file: its tensors are named model.embed_tokens.weight, ...; the config.json
// beside it gives the configuration (the shapes do not give the head counts, rope_theta or eps),
// and the embedding's shape must agree with it.
std::optional<TextOptions> read_llama_safetensors(const std::string& path) {
  const SafetensorsSet reader(path);  // one file, or the shards of an index
  const SafetensorsEntry* embedding = reader.find("model.embed_tokens.weight");
  if (embedding == nullptr) return std::nullopt;  // not Llama's names
  const std::string config = hf_config_path(path);
  MT_CHECK(std::filesystem::exists(config), "'", path,
           "' holds Llama tensors but there is no config.json beside it ('", config,
           "'): Llama's head counts, rope_theta and rms_norm_eps come from transformers' "
           "config.json");
  TextOptions out = read_llama_config_json(config, path);
  MT_CHECK(embedding->shape.size() == 2, "'", path,
           "': model.embed_tokens.weight must be [V, d], "
           "got ",
           shape_string(embedding->shape));
  for (const auto& [option, held] :
       {std::pair{"vocab", embedding->shape[0]}, {"dim", embedding->shape[1]}}) {
    const auto given = out.find(option);
    MT_CHECK(given == out.end() || given->second == std::to_string(held), "'", config, "' gives ",
             option, " ", given == out.end() ? "" : given->second, ", but '", path,
             "' holds model.embed_tokens.weight of shape ", shape_string(embedding->shape));
  }
  return out;
}

LlamaConfig config_of(const OptionValues& v) {
  return LlamaConfig{.vocab = v.integer("vocab"),
                     .ctx = v.integer("ctx"),
                     .dim = v.integer("dim"),
                     .ffn_dim = v.integer("ffn_dim"),
                     .layers = v.integer("layers"),
                     .heads = v.integer("heads"),
                     .kv_heads = v.integer("kv_heads"),
                     .rope_theta = v.real("rope_theta"),
                     .rms_norm_eps = v.real("rms_norm_eps"),
                     .tie_embeddings = v.boolean("tie_embeddings")};
}

}  // namespace

ModelSpecPtr llama_model(const LlamaConfig& config) { return std::make_shared<LlamaSpec>(config); }

LlamaConfig llama_config(const ModelSpec& model) {
  const auto* llama = dynamic_cast<const LlamaSpec*>(&model);
  MT_CHECK(llama != nullptr, "expected a Llama model, got ", model.describe());
  return llama->config();
}

ModelFamily llama_family() {
  const auto size = [](std::string name, std::string flag, std::string help) {
    return OptionSpec{.name = std::move(name),
                      .type = OptionSpec::Type::integer,
                      .help = std::move(help),
                      .minimum = 1,
                      .flag = std::move(flag)};
  };
  // vocab, ctx, dim, layers and heads share GPT-2's flags: one flag, one meaning.
  ModelFamily family{
      .name = "llama",
      .help =
          "Llama 3 (RMSNorm, rotary positions, SwiGLU MLP, grouped-query attention); "
          "Hugging Face names",
      .options = {size("vocab", "--vocab", "vocabulary size (V)"),
                  size("ctx", "--ctx", "context length (T): the longest sequence"),
                  size("dim", "--dim", "model width (d)"),
                  size("ffn_dim", "--ffn-dim", "the gated MLP's width (intermediate_size)"),
                  size("layers", "--layers", "transformer blocks (L)"),
                  size("heads", "--heads", "attention heads (H), dividing --dim"),
                  size("kv_heads", "--kv-heads", "key/value heads (KV), dividing --heads"),
                  OptionSpec{.name = "rope_theta",
                             .type = OptionSpec::Type::real,
                             .help = "the rotary embeddings' base",
                             .default_value = "500000",
                             .flag = "--rope-theta"},
                  OptionSpec{.name = "rms_norm_eps",
                             .type = OptionSpec::Type::real,
                             .help = "RMSNorm's epsilon",
                             .default_value = "1e-05",
                             .flag = "--rms-norm-eps"},
                  OptionSpec{.name = "tie_embeddings",
                             .type = OptionSpec::Type::boolean,
                             .help = "the LM head shares embed_tokens (tie_word_embeddings)",
                             .default_value = "false",
                             .flag = "--tie-embeddings"}},
      .presets = {},
      .factory = [](const OptionValues& v) { return llama_model(config_of(v)); },
      .read_safetensors = read_llama_safetensors};
  for (const std::string& name : llama_preset_names())
    family.presets[name] = LlamaSpec(llama_preset(name)).options();
  return family;
}

}  // namespace meshtrain
