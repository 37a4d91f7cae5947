// The GPT-2 shape a safetensors checkpoint implies: V and d from wte, T from wpe, L from the
// blocks present. The head count is not stored in the file and comes from the caller.
#pragma once

#include <string>

#include "models/gpt2_config.h"

namespace meshtrain {

GPT2Config gpt2_config_from_checkpoint(const std::string& path, int64_t heads);

}  // namespace meshtrain
