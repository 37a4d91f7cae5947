// The config.json beside an exported safetensors file (DIR/config.json for DIR/model.safetensors),
// Hugging Face's layout: transformers loads the folder, and --init reads the model's configuration
// from it (ModelSpec::hf_config).
#pragma once

#include <string>
#include <string_view>

#include "meshtrain/models/hf_config_path.h"
#include "meshtrain/models/model_spec.h"

namespace meshtrain {

// Before a run: InvalidArgument when the folder of `safetensors_path` already holds a config.json
// that describes another model, which the export would replace unasked (`what` names the output,
// "--save").
void check_hf_config_target(const ModelSpec& model, const std::string& safetensors_path,
                            std::string_view what);

// Writes the model's config.json beside `safetensors_path`, whole or not at all; nothing for a
// family without one. Returns the path written, or "".
std::string write_hf_config(const ModelSpec& model, const std::string& safetensors_path);

}  // namespace meshtrain
