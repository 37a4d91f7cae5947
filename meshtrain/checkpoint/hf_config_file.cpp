#include "meshtrain/checkpoint/hf_config_file.h"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "meshtrain/checkpoint/durable_files.h"
#include "meshtrain/core/error.h"

namespace meshtrain {

void check_hf_config_target(const ModelSpec& model, const std::string& safetensors_path,
                            std::string_view what) {
  const std::string config = model.hf_config();
  const std::string path = hf_config_path(safetensors_path);
  if (config.empty() || !std::filesystem::exists(path)) return;
  check_regular_output(path, what);
  const nlohmann::json held = nlohmann::json::parse(read_small_file(path), nullptr, false);
  MT_CHECK(held == nlohmann::json::parse(config), what, " '", safetensors_path,
           "' would replace '", path, "', which is not this model's configuration; save into a "
           "folder of its own, or remove it");
}

std::string write_hf_config(const ModelSpec& model, const std::string& safetensors_path) {
  const std::string config = model.hf_config();
  if (config.empty()) return "";
  const std::string path = hf_config_path(safetensors_path);
  write_file_atomically(path, config);
  return path;
}

}  // namespace meshtrain
