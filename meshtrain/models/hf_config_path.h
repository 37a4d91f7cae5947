// Where Hugging Face's config.json of an exported model lies: beside its safetensors file
// (DIR/config.json for DIR/model.safetensors), the folder layout transformers loads.
#pragma once

#include <string>

namespace meshtrain {

std::string hf_config_path(const std::string& safetensors_path);

}  // namespace meshtrain
