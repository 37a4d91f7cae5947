// Reading transformers' config.json beside the tensors a model family recognised: the parts every
// family's reader shares (parse, check the model type, map integer keys to options).
#pragma once

#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>

#include "meshtrain/parallel/declared_options.h"

namespace meshtrain {

// The config.json at `path`, a JSON object of model_type `model_type`. InvalidArgument otherwise,
// naming the file and, for another type, the tensors (of `tensors_path`, `family`'s) it describes.
nlohmann::json read_hf_config(const std::string& path, std::string_view model_type,
                              std::string_view family, const std::string& tensors_path);

// option -> value for each (config key, option) pair whose key the config holds; InvalidArgument
// naming the file and the key for a value that is not an integer.
TextOptions hf_integer_options(
    const nlohmann::json& config, const std::string& path,
    std::initializer_list<std::pair<const char*, const char*>> key_to_option);

}  // namespace meshtrain
