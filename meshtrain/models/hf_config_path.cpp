#include "meshtrain/models/hf_config_path.h"

#include <filesystem>

#include "meshtrain/core/error.h"

namespace meshtrain {

std::string hf_config_path(const std::string& safetensors_path) {
  return (std::filesystem::path(safetensors_path).parent_path() / "config.json").string();
}

bool is_hf_folder(const std::string& path) {
  return std::filesystem::is_directory(path) &&
         std::filesystem::exists(std::filesystem::path(path) / "config.json");
}

std::string hf_weights_path(const std::string& path) {
  if (!is_hf_folder(path)) return path;
  const std::filesystem::path folder(path);
  MT_CHECK(!std::filesystem::exists(folder / "model.safetensors.index.json"), "'", path,
           "' holds sharded weights (model.safetensors.index.json), which meshtrain does not read "
           "yet; expected one model.safetensors");
  const std::string weights = (folder / "model.safetensors").string();
  MT_CHECK(std::filesystem::exists(weights), "Hugging Face folder '", path,
           "' (it has a config.json) has no model.safetensors");
  return weights;
}

}  // namespace meshtrain
