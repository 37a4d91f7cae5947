// GPT-2 as a meshtrain Model: layer 0 is the embedding, layers 1..L the blocks, layer L + 1 the
// head (ln_f, tied LM head, cross-entropy). Parameter names and shapes are Hugging Face's
// (wte.weight, h.{i}.attn.c_attn.weight [d, 3d], ...), so checkpoints load without mapping.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "meshtrain/core/device.h"
#include "meshtrain/models/gpt2_config.h"
#include "meshtrain/models/gpt2_layers.h"
#include "meshtrain/parallel/model.h"

namespace meshtrain {

struct GPT2Options {
  Device device = Device::cpu();
  uint64_t seed = 1337;
  // false: create the parameters without tensors; a plan then fills only each rank's pieces
  // (ParallelPlan::apply with a Gpt2InitValues or another ParameterSource), so no rank ever
  // holds the full model.
  bool materialize = true;
};

class GPT2 : public Model {
 public:
  // Validates the config; when materializing, allocates each value (MemoryCategory::param) and
  // zeroed gradient (MemoryCategory::grad) on the device and initialises from the seed.
  explicit GPT2(const GPT2Config& config, const GPT2Options& options = {});

  const GPT2Config& config() const { return config_; }
  Device device() const { return device_; }  // where its tensors live
  std::vector<Parameter*> parameters() override;  // wte, wpe, h.0.*, ..., ln_f.*
  std::vector<Layer*> layers() override;
  // "root" = {embedding, head} (they share wte), then "h.0" ... "h.{L-1}".
  std::vector<UnitSpec> default_units() override;
  // Megatron-LM's: c_attn and c_fc column-parallel, both c_proj row-parallel, heads split,
  // vocab-parallel embedding and head, LayerNorms and wpe sequence-parallel.
  std::vector<nn::TpRule> tensor_parallel_plan() override;

  // InvalidArgument for an unknown name.
  Parameter& parameter(std::string_view name);
  // Block i's parameters (h.{i}.*), by role.
  const BlockParameters& block_parameters(int64_t i) const { return block_params_.at(i); }
  // Overwrites every parameter's value with its initial value under the seed.
  void init(uint64_t seed);

 private:
  Parameter* add_parameter(std::string name, Shape shape);

  GPT2Config config_;
  Device device_;
  std::vector<std::unique_ptr<Parameter>> params_;
  std::unique_ptr<Gpt2Embedding> embedding_;
  std::vector<BlockParameters> block_params_;
  std::vector<std::unique_ptr<Gpt2Block>> blocks_;
  std::unique_ptr<Gpt2Head> head_;
};

}  // namespace meshtrain
