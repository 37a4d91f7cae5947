// What a run will need, known before it starts: the host bytes one rank holds at least (the ZeRO
// model state of its shard, the logits of its micro-batch and the local backend's per-rank
// overhead; on GPUs only the overhead and, offloaded, the model state), and the checks built on
// it. An estimate from below: a run it refuses cannot fit.
#pragma once

#include <cstdint>
#include <string>

#include "meshtrain/train/train_config.h"

namespace meshtrain {

// Resident memory one rank of the local backend costs beyond its tensors (its thread, its
// communicators' progress threads, their stacks and allocator arenas, and what grows with the
// world: per-peer state of the groups, the step figures gathered from every rank). Measured
// 2026-12-04, peak resident set of the tiny model for one step (--batch W --seq 8) at W = 250,
// 500, 1000 and 2000: 2.63, 3.08, 3.65 and 5.84 MiB per rank, growing faster than W. A fit from
// below (so a run the estimate refuses cannot fit), not a model of where the bytes go:
// 2.2 MiB + 0.95 B x W^2 per rank, within 0.3% of the peak at W = 2000 and below the others;
// 10.4 MiB at W = 3000 (30 GiB in all, where 3000 ranks used to pass the check and run the
// 24 GiB build machine out of memory).
double local_rank_overhead_bytes(int world);

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
