// A model family written outside meshtrain/models, as a user writes one: a residual-MLP language
// model (embedding, blocks of x + proj(gelu(fc(x))), untied head) with its own options, TP plan,
// initialisation and Hugging-Face-style names, registered by name. The trainer, checkpoints,
// exports and the command line know it only through ModelSpec and the registry.
#pragma once

#include "meshtrain/models/model_registry.h"

namespace meshtrain::testing {

// "mlp_lm": options vocab, dim, blocks (flags --vocab, --dim, --blocks); preset "mlp-tiny"
// (vocab 64, dim 32, blocks 2).
ModelFamily mlp_family();

}  // namespace meshtrain::testing
