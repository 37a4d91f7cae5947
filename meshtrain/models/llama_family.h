// Llama 3 as a registered model family: its options (--vocab, --ctx, --dim, --ffn-dim, --layers,
// --heads, --kv-heads, --rope-theta, --rms-norm-eps, --tie-embeddings), the presets of
// meshtrain/models/llama_config.h, and its ModelSpec (the model, its initialisation, its
// transformers config.json).
#pragma once

#include "meshtrain/models/llama_config.h"
#include "meshtrain/models/model_registry.h"

namespace meshtrain {

// The Llama model of `config` (validated: InvalidArgument naming the field).
ModelSpecPtr llama_model(const LlamaConfig& config);
// The configuration of a Llama model (InvalidArgument for a model of another family).
LlamaConfig llama_config(const ModelSpec& model);
ModelFamily llama_family();

}  // namespace meshtrain
