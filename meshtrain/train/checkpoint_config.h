// The GPT-2 shape a safetensors checkpoint implies: V and d from wte, T from wpe, L from the
// blocks present, the head count from the file's "heads" metadata (meshtrain writes it) or
// `heads` (0: not given). InvalidArgument when neither gives one or the two differ.
#pragma once

#include <string>

#include "meshtrain/models/gpt2_config.h"

namespace meshtrain {

GPT2Config gpt2_config_from_checkpoint(const std::string& path, int64_t heads);

}  // namespace meshtrain
