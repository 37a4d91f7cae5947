// GPT-2's initialisation (as in GPT-2 and llm.c): weights normal(0, 0.02), the residual
// projections (attn.c_proj, mlp.c_proj) normal(0, 0.02 / sqrt(2 L)), biases 0, LayerNorm gains 1.
// Each parameter draws from its own stream (the hash of its name), so values depend only on the
// seed and the name: never on the number of ranks, the parameter order or how it is sharded.
#pragma once

#include <cstdint>
#include <string_view>

#include "meshtrain/models/gpt2_config.h"
#include "meshtrain/parallel/parameter_source.h"

namespace meshtrain {

// Writes elements [offset, offset + count) of the parameter's flattened initial value to out.
// InvalidArgument for a name that is not a GPT-2 parameter.
void gpt2_init_values(const GPT2Config& config, std::string_view name, uint64_t seed,
                      int64_t offset, int64_t count, float* out);

// GPT-2's initial values as a ParameterSource: each rank generates only its own pieces.
class Gpt2InitValues : public ParameterSource {
 public:
  Gpt2InitValues(const GPT2Config& config, uint64_t seed) : config_(config), seed_(seed) {}
  void read(const Parameter& p, const std::vector<LocalPiece>& pieces,
            const Tensor& local) const override;

 private:
  GPT2Config config_;
  uint64_t seed_;
};

}  // namespace meshtrain
