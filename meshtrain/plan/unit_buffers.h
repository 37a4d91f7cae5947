// The full-parameter buffers FSDP holds at once (MemoryCategory::unsharded_param), from the order
// in which the engine's hooks unshard and reshard the units (FsdpRuntime): a unit is unsharded at
// its first layer's forward and at its last layer's backward; it reshards after its forward when
// it reshards after forward (blocks under full and hybrid; the root only when asked), and after
// its backward. Under a pipeline schedule a unit keeps its full parameters from its first
// forward to its last backward of the step, and every forward of the first micro-batch precedes
// the last backward, so all of a rank's units are unsharded together.
//
// Prefetching only starts all-gathers early: their outputs are communication buffers
// (MemoryCategory::comm), and a unit's full parameters are assembled when it computes, so the
// prefetch limit does not change this figure.
#pragma once

#include <cstdint>
#include <vector>

#include "meshtrain/parallel/units.h"

namespace meshtrain {

struct UnitBuffer {
  int64_t bytes = 0;  // its full parameters in the compute dtype; 0 when they are views of shards
  bool reshard_after_forward = true;
};

// The most bytes of full parameters alive at once over one step, `units` indexed as plan.units.
// Exact for one micro-batch or more without a pipeline and for pipelines that keep units
// unsharded between forward and backward (FSDP's default there); an upper bound for pipelines
// asked to reshard after forward.
int64_t unsharded_param_peak(const UnitPlan& plan, const std::vector<UnitBuffer>& units,
                             bool pipelined);

}  // namespace meshtrain
