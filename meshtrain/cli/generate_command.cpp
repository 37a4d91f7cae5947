#include <cstdio>
#include <iostream>

#include "meshtrain/cli/commands.h"
#include "meshtrain/cli/declared_flags.h"
#include "meshtrain/core/error.h"
#include "meshtrain/models/sampling.h"
#include "meshtrain/train/train_config.h"
#include "meshtrain/train/whole_model.h"

namespace meshtrain {

namespace {
struct GenerateFlags {
  std::string from;
  std::string prompt;      // bytes, for byte-level models
  std::string prompt_ids;  // "15,496,11": token ids, for any model
  // Defaults of the sample `train` prints at its end: the same model gives the same text.
  SampleOptions sample{
      .count = 256, .temperature = kDefaultSampleTemperature, .seed = TrainConfig{}.seed};
  TextOptions model_options;  // what a safetensors file does not say (GPT-2's --heads)
};

std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, comma - at);
    const std::optional<int32_t> id = parse_integer<int32_t>(item);
    MT_CHECK(id.has_value(),
             "--prompt-ids: expected token ids separated by commas (15,496,11), got '", item,
             "' in '", text, "'");
    ids.push_back(*id);
    at = comma + 1;
  }
  return ids;
}

// The prompt as token ids: bytes for a byte-level model, else the ids given.
std::vector<int32_t> prompt_tokens(const GenerateFlags& f, const ModelSpec& model) {
  if (!f.prompt_ids.empty()) return parse_ids(f.prompt_ids);
  MT_CHECK(model.vocab() == 256, "--prompt: ", model.describe(), " has a vocabulary of ",
           model.vocab(),
           " tokens, not bytes, and meshtrain has no tokenizer yet; give the prompt as token ids "
           "(--prompt-ids 15,496,11)");
  std::vector<int32_t> ids;
  for (unsigned char c : f.prompt.empty() ? std::string("\n") : f.prompt) ids.push_back(c);
  return ids;
}

void generate_text(const GenerateFlags& f, const ModelRegistry& models) {
  const WholeModel whole = load_whole_model(f.from, models, f.model_options);
  const std::unique_ptr<Decoder> decoder = whole.spec->decoder(*whole.model);
  MT_CHECK(decoder != nullptr, "generate: the ", whole.spec->family(),
           " family has no decoder to generate with");
  const std::vector<int32_t> prompt = prompt_tokens(f, *whole.spec);
  std::cerr << "generating " << f.sample.count << " tokens with " << whole.spec->describe()
            << " from " << whole.source << "\n";
  // Bytes go out as text, other tokens as ids; each as soon as it is drawn.
  const bool as_text = f.prompt_ids.empty();
  const auto put = [&](int32_t token) {
    if (as_text)
      std::cout.put(static_cast<char>(token));
    else
      std::cout << token << " ";
    std::cout.flush();
  };
  for (int32_t token : prompt) put(token);
  generate(*decoder, prompt, f.sample, put);
  std::cout << "\n";
}
}  // namespace

void add_generate_command(CLI::App& app, const Registries& registries) {
  auto* cmd = app.add_subcommand(
      "generate",
      "Generate text from a trained model with its key/value cache, on one rank: a checkpoint "
      "written on any mesh, or a Hugging Face model");
  auto f = std::make_shared<GenerateFlags>();
  const ModelRegistry& models = registries.models;
  cmd->add_option("--from", f->from,
                  "a checkpoint (a step-N folder, or a --checkpoint-dir folder: its newest) or a "
                  "Hugging Face model (safetensors file, sharded index or folder)")
      ->required()
      ->check(CLI::ExistingPath);
  auto* prompt = cmd->add_option(
      "--prompt", f->prompt, "text to continue, as bytes (byte-level models; default a newline)");
  cmd->add_option("--prompt-ids", f->prompt_ids,
                  "token ids to continue, separated by commas (any model; printed as ids)")
      ->excludes(prompt);
  cmd->add_option("--tokens", f->sample.count, "tokens to generate")
      ->check(kNonNegativeInteger)
      ->capture_default_str();
  cmd->add_option("--temperature", f->sample.temperature, "0: greedy")->capture_default_str();
  cmd->add_option("--top-k", f->sample.top_k, "draw among the k most likely tokens (0: all)")
      ->check(kNonNegativeInteger)
      ->capture_default_str();
  cmd->add_option("--top-p", f->sample.top_p,
                  "draw among the most likely tokens holding this much probability (1: all)")
      ->capture_default_str();
  cmd->add_option("--seed", f->sample.seed, "the same seed gives the same text")
      ->capture_default_str();
  add_model_flags(cmd, models, f->model_options);
  cmd->callback([f, &models] { generate_text(*f, models); });
}

}  // namespace meshtrain
