// Llama 3 as a meshtrain Model, by Hugging Face's LlamaForCausalLM conventions: layer 0 is the
// embedding, layers 1..L the blocks, layer L + 1 the head (model.norm, lm_head, cross-entropy).
// Parameter names and layouts are transformers' (model.layers.{i}.self_attn.q_proj.weight
// [H * hd, d], linear weights [out, in], no biases), so its checkpoints load without mapping.
// The parameters are created without tensors: a plan fills each rank's pieces.
#pragma once

#include <memory>

#include "meshtrain/core/device.h"
#include "meshtrain/models/llama_config.h"
#include "meshtrain/models/llama_layers.h"
#include "meshtrain/parallel/model.h"

namespace meshtrain {

class Llama : public Model {
 public:
  // Validates the config (InvalidArgument naming the field).
  Llama(const LlamaConfig& config, Device device);

  const LlamaConfig& config() const { return config_; }
  // model.embed_tokens, model.layers.0.*, ..., model.norm, lm_head (absent when tied).
  std::vector<Parameter*> parameters() override;
  std::vector<Layer*> layers() override;
  // "root" = {embedding, head}, then "model.layers.0" ... "model.layers.{L-1}".
  std::vector<UnitSpec> default_units() override;
  // torchtitan's and Megatron's: q, k, v, gate and up column-parallel (the query and key/value
  // heads split over tp), o and down row-parallel, the embedding and head vocab-parallel, the
  // RMSNorms sequence-parallel.
  std::vector<nn::TpRule> tensor_parallel_plan() override;

 private:
  Parameter* add_parameter(std::string name, Shape shape);

  LlamaConfig config_;
  Device device_;
  std::vector<std::unique_ptr<Parameter>> params_;
  std::unique_ptr<LlamaEmbedding> embedding_;
  std::vector<std::unique_ptr<LlamaBlock>> blocks_;
  std::unique_ptr<LlamaHead> head_;
};

}  // namespace meshtrain
