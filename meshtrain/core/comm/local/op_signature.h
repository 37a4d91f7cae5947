// What every rank must agree on for a collective in one slot: op, size, dtype, reduction, root,
// and where the buffers live (host, GPU or shape-only memory: one collective moves one kind).
#pragma once

#include <cstddef>
#include <string>

#include "meshtrain/core/comm/types.h"
#include "meshtrain/core/device.h"
#include "meshtrain/core/dtype.h"

namespace meshtrain::local {

struct OpSignature {
  CommOp op = CommOp::barrier;
  size_t bytes = 0;  // the buffer each rank passes in (all_reduce, broadcast: the buffer)
  DType dtype = DType::f32;
  ReduceOp reduce = ReduceOp::sum;  // reduce_scatter, all_reduce only
  int root = 0;                     // broadcast only
  DeviceKind memory = DeviceKind::cpu;

  bool operator==(const OpSignature&) const = default;
};

// "all_reduce (sum) of 4096 bytes (f32)", "broadcast from root 1 of 64 bytes (bf16) in CUDA
// memory".
std::string describe(const OpSignature& signature);

// Ranks each collective waits at: arrival, the final release, and all-reduce's middle phase.
int phase_count(CommOp op);

}  // namespace meshtrain::local
