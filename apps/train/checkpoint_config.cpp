#include "apps/train/checkpoint_config.h"

#include <set>

#include "core/error.h"
#include "models/checkpoint.h"
#include "models/safetensors.h"

namespace meshtrain {

GPT2Config gpt2_config_from_checkpoint(const std::string& path, int64_t heads) {
  SafetensorsReader reader(path);
  GPT2Config config;
  bool have_wte = false, have_wpe = false;
  std::set<int64_t> blocks;
  for (const SafetensorsEntry& e : reader.entries()) {
    const auto name = checkpoint_parameter_name(e.name);
    if (!name) continue;
    if (*name == "wte.weight" && e.shape.size() == 2) {
      config.vocab = e.shape[0];
      config.dim = e.shape[1];
      have_wte = true;
    } else if (*name == "wpe.weight" && e.shape.size() == 2) {
      config.ctx = e.shape[0];
      have_wpe = true;
    } else if (name->rfind("h.", 0) == 0) {
      blocks.insert(std::stoll(name->substr(2, name->find('.', 2) - 2)));
    }
  }
  if (!have_wte || !have_wpe)
    throw InvalidArgument(detail::concat("'", path, "' has no 2-D ", have_wte ? "wpe" : "wte",
                                         ".weight; is it a GPT-2 checkpoint?"));
  config.layers = static_cast<int64_t>(blocks.size());
  config.heads = heads;
  config.validate();
  return config;
}

}  // namespace meshtrain
