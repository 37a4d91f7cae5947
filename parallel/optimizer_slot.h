// OptimizerSlot: one tensor the optimizer updates, with its gradient. Without sharding a slot is a
// whole parameter; under FSDP it is this rank's fp32 master shard and its reduced gradient shard.
#pragma once

#include <string>

#include "core/tensor.h"

namespace meshtrain {

struct OptimizerSlot {
  std::string name;  // the parameter's name (state in checkpoints and errors)
  Tensor param;      // f32, updated in place
  Tensor grad;       // f32, same numel
  bool decays = true;
};

}  // namespace meshtrain
