// OptimizerSlot: one tensor the optimizer updates, with its gradient. Without sharding a slot is a
// whole parameter (its tensor-parallel piece under TP); under FSDP it is this rank's fp32 master
// shard and its reduced gradient shard. Its layout says which slice of the global tensor it is.
#pragma once

#include <string>

#include "meshtrain/core/tensor.h"
#include "meshtrain/mesh/layout.h"

namespace meshtrain {

struct OptimizerSlot {
  std::string name;  // the parameter's name (state in checkpoints and errors)
  Tensor param;      // f32, updated in place
  Tensor grad;       // f32, same numel
  bool decays = true;
  Layout layout;     // of the slot over the mesh (the parameter's, then FSDP's shard axis)
  bool tied_copy = false;  // Parameter::tied_copy: its twin on another pipeline stage counts
};

}  // namespace meshtrain
