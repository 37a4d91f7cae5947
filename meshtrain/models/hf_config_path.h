// Hugging Face's model folder, the layout transformers loads and saves: config.json beside the
// weights (DIR/config.json and DIR/model.safetensors).
#pragma once

#include <string>

namespace meshtrain {

// Where the config.json of the model in a safetensors file lies: beside it.
std::string hf_config_path(const std::string& safetensors_path);
// Whether `path` is a Hugging Face model folder: a folder holding a config.json.
bool is_hf_folder(const std::string& path);
// The safetensors file of the model at `path`: the file itself, or a folder's model.safetensors.
// InvalidArgument for a folder whose weights are sharded (model.safetensors.index.json), which
// meshtrain does not read yet, or that has no model.safetensors.
std::string hf_weights_path(const std::string& path);

}  // namespace meshtrain
