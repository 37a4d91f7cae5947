// What a run will need, known before it starts: the bytes one rank holds at least (the ZeRO model
// state of its shard, the logits of its micro-batch and the local backend's per-rank overhead), and
// the checks built on it. An estimate from below: a run it refuses cannot fit.
#pragma once

#include <cstdint>

#include "apps/train/train_config.h"

namespace meshtrain {

// Resident memory one rank of the local backend costs beyond its tensors (its threads, its
// communicators' progress threads and their allocator arenas); measured, see docs/failures.md.
inline constexpr double kLocalRankOverheadBytes = 4.5 * (1 << 20);

// A lower bound of one rank's peak bytes, in double so that no size overflows.
double estimate_rank_bytes(const TrainConfig& config);
// Bytes the machine has (physical memory), 0 when unknown.
double machine_memory_bytes();
// Bytes free for an unprivileged writer in the file system of `folder`, negative when unknown.
double free_disk_bytes(const std::string& folder);

}  // namespace meshtrain
