#include "meshtrain/models/hf_config_json.h"

#include <cstdint>
#include <fstream>
#include <limits>

#include "meshtrain/core/error.h"

namespace meshtrain {

nlohmann::json read_hf_config(const std::string& path, std::string_view model_type,
                              std::string_view family, const std::string& tensors_path) {
  std::ifstream in(path);
  nlohmann::json config = nlohmann::json::parse(in, nullptr, false);
  MT_CHECK(config.is_object(), "'", path, "' is not a JSON object");
  const auto held = config.find("model_type");
  const std::string type = held == config.end() ? ""
                           : held->is_string()  ? held->get<std::string>()
                                                : held->dump();
  MT_CHECK(type == model_type, "'", path, "' describes a model of type '", type,
           "', but the tensors of '", tensors_path, "' are ", family, "'s; expected model_type ",
           model_type);
  return config;
}

TextOptions hf_integer_options(
    const nlohmann::json& config, const std::string& path,
    std::initializer_list<std::pair<const char*, const char*>> key_to_option) {
  TextOptions out;
  for (const auto& [key, option] : key_to_option) {
    if (!config.contains(key)) continue;
    MT_CHECK(config[key].is_number_integer(), "'", path, "': ", key, " must be an integer, got ",
             config[key].dump());
    // get<int64_t> would wrap one above 2^63 - 1 to a negative count, named as if the file held it.
    MT_CHECK(!config[key].is_number_unsigned() ||
                 config[key].get<uint64_t>() <= uint64_t{std::numeric_limits<int64_t>::max()},
             "'", path, "': ", key, " must be an integer of at most ",
             std::numeric_limits<int64_t>::max(), ", got ", config[key].dump());
    out[option] = std::to_string(config[key].get<int64_t>());
  }
  return out;
}

}  // namespace meshtrain
