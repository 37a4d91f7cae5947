#include "meshtrain/models/hf_config_path.h"

#include <filesystem>

#include "meshtrain/core/error.h"

namespace meshtrain {

std::string hf_config_path(const std::string& weights_path) {
  return (std::filesystem::path(weights_path).parent_path() / "config.json").string();
}

bool is_hf_folder(const std::string& path) {
  return std::filesystem::is_directory(path) &&
         std::filesystem::exists(std::filesystem::path(path) / "config.json");
}

std::string hf_weights_path(const std::string& path) {
  if (!is_hf_folder(path)) return path;
  const std::filesystem::path folder(path);
  for (const char* weights : {"model.safetensors", "model.safetensors.index.json"})
    if (std::filesystem::exists(folder / weights)) return (folder / weights).string();
  throw InvalidArgument(detail::concat("Hugging Face folder '", path,
                                       "' (it has a config.json) has neither a model.safetensors "
                                       "nor a sharded model.safetensors.index.json"));
}

}  // namespace meshtrain
