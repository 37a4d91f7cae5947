// The model families meshtrain ships (GPT-2 and Llama 3), registered in a registry a program may add its own
// families to.
#pragma once

#include "meshtrain/models/model_registry.h"

namespace meshtrain {

ModelRegistry builtin_models();

}  // namespace meshtrain
