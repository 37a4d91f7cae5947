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

// Host collectives that write at most this many bytes over all the group's outputs are moved by
// the last rank to arrive.
inline constexpr size_t kLastRankMovesBytes = 256 * 1024;

// Whether the last rank to arrive moves every rank's data, so that the op is one meeting in which
// that rank never waits, rather than each rank moving its own share between barriers (an
// all-reduce meets three times): host ops that write at most kLastRankMovesBytes over the
// group's outputs, whose data costs less to move on one thread than the wake-ups of the meetings
// where ranks outnumber cores, and shape-only ops (nothing moves). Not barriers (no data) nor
// CUDA memory (each rank's copies run on its own stream). Every rank decides alike.
bool last_rank_moves(const OpSignature& signature, int group_size);

// Ranks each collective waits at: arrival and the release after the data moved (one phase where
// the last rank moves it all), and all-reduce's middle phase where each rank moves its share.
int phase_count(const OpSignature& signature, int group_size);

}  // namespace meshtrain::local
