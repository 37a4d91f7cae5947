// Llama's initialisation (torchtitan's and GPT-2's scheme): embeddings and the projections
// normal(0, 0.02), the residual projections (o_proj, down_proj) normal(0, 0.02 / sqrt(2 L)), the
// RMSNorm gains 1. Each parameter draws from its own stream (the hash of its name), so values
// depend only on the seed and the name: never on the number of ranks or how it is sharded.
#pragma once

#include <cstdint>

#include "meshtrain/models/llama_config.h"
#include "meshtrain/parallel/parameter_source.h"

namespace meshtrain {

class LlamaInitValues : public ParameterSource {
 public:
  LlamaInitValues(const LlamaConfig& config, uint64_t seed) : config_(config), seed_(seed) {}
  // InvalidArgument for a parameter that is not one of Llama's.
  void read(const Parameter& p, const std::vector<LocalPiece>& pieces,
            const Tensor& local) const override;

 private:
  LlamaConfig config_;
  uint64_t seed_;
};

}  // namespace meshtrain
