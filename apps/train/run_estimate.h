// What a run will need, known before it starts: the host bytes one rank holds at least (the ZeRO
// model state of its shard, the logits of its micro-batch and the local backend's per-rank
// overhead; on GPUs only the overhead and, offloaded, the model state), and the checks built on
// it. An estimate from below: a run it refuses cannot fit.
#pragma once

#include <cstdint>
#include <string>

#include "apps/train/train_config.h"

namespace meshtrain {

// Resident memory one rank of the local backend costs beyond its tensors (its thread, its
// communicators' progress threads, their stacks and allocator arenas). Measured 2026-12-03: the
// tiny model at --world 100 and 500 peaked at 333 MB and 1,558 MB resident, 3.1 MB per rank.
inline constexpr double kLocalRankOverheadBytes = 3.0 * (1 << 20);

// A lower bound of one rank's peak host bytes (in double, so that no size overflows) and its parts
// ("model state, logits, the local backend's overhead").
struct HostBytes {
  double bytes = 0.0;
  std::string parts;
};
HostBytes estimate_rank_host_bytes(const TrainConfig& config);
// Bytes the machine has (physical memory), 0 when unknown.
double machine_memory_bytes();
// Bytes free for an unprivileged writer in the file system of `folder`, negative when unknown.
double free_disk_bytes(const std::string& folder);

}  // namespace meshtrain
