#include "meshtrain/models/hf_config_path.h"

#include <filesystem>

namespace meshtrain {

std::string hf_config_path(const std::string& safetensors_path) {
  return (std::filesystem::path(safetensors_path).parent_path() / "config.json").string();
}

}  // namespace meshtrain
