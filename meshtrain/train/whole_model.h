// A trained model whole on this rank, for inference (generation, evaluation): read from a
// checkpoint written on any mesh, whose metadata names the model, or from Hugging Face weights (a
// safetensors file, a sharded index or a model folder), whose shapes and config.json do.
#pragma once

#include <memory>
#include <string>

#include "meshtrain/models/model_registry.h"
#include "meshtrain/parallel/model.h"

namespace meshtrain {

struct WholeModel {
  ModelSpecPtr spec;
  std::unique_ptr<Model> model;  // every parameter's whole value, f32 on the host; no gradients
  std::string source;            // "checkpoint 'ckpt/step-00000040'", or the weights' path quoted
};

// `given` supplies the options the weights do not say (GPT-2's heads in a file without its
// config.json) and must agree with those they say, as train's --init takes them. InvalidArgument
// naming the path for a folder with neither checkpoints nor a config.json, weights no family
// recognises, or options that disagree; the readers' errors for a damaged checkpoint or file.
WholeModel load_whole_model(const std::string& path, const ModelRegistry& models,
                            const TextOptions& given = {});

}  // namespace meshtrain
