// Hugging Face's model folder, the layout transformers loads and saves: config.json beside the
// weights, in one file (DIR/model.safetensors) or sharded (DIR/model.safetensors.index.json naming
// DIR/model-00001-of-0000N.safetensors, ...).
#pragma once

#include <string>

namespace meshtrain {

// Where the config.json of the model whose weights are at `weights_path` (a safetensors file or a
// sharded index) lies: beside them.
std::string hf_config_path(const std::string& weights_path);
// Whether `path` is a Hugging Face model folder: a folder holding a config.json.
bool is_hf_folder(const std::string& path);
// The weights of the model at `path`, as SafetensorsSet reads them: the path itself for a file, a
// folder's model.safetensors, or else its model.safetensors.index.json (transformers' own order
// when a folder holds both). InvalidArgument for a folder that holds neither.
std::string hf_weights_path(const std::string& path);

}  // namespace meshtrain
