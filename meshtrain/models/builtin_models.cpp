#include "meshtrain/models/builtin_models.h"

#include "meshtrain/models/gpt2_family.h"
#include "meshtrain/models/llama_family.h"

namespace meshtrain {

ModelRegistry builtin_models() {
  ModelRegistry registry;
  registry.add(gpt2_family());
  registry.add(llama_family());
  return registry;
}

}  // namespace meshtrain
