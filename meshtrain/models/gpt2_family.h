// GPT-2 as a registered model family: its options (--vocab, --ctx, --dim, --layers, --heads), the
// presets of meshtrain/models/gpt2_config.h, and its ModelSpec (the model, its initialisation,
// its decoder, the head count recorded in exported files).
#pragma once

#include "meshtrain/models/gpt2_config.h"
#include "meshtrain/models/model_registry.h"

namespace meshtrain {

// The GPT-2 model of `config` (validated: InvalidArgument naming the field).
ModelSpecPtr gpt2_model(const GPT2Config& config);
// The configuration of a GPT-2 model (InvalidArgument for a model of another family).
GPT2Config gpt2_config(const ModelSpec& model);
ModelFamily gpt2_family();

}  // namespace meshtrain
