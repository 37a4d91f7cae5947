// One layout's checkpoint measurements: W ranks as threads train a few steps with Trainer, save
// distributed checkpoints of that state, then construct Trainers fresh (from the seed) and from
// the checkpoint (--resume), each repeated and reduced to medians of the slowest rank.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/train/mode_run.h"

namespace meshtrain::bench {

inline constexpr double kMB = 1e6;  // sizes and throughput in decimal megabytes

struct CheckpointResult {
  double step_s = 0.0;  // median training step (slowest rank)
  // Process CPU seconds per measured step, all threads: what other load disturbs far less.
  double step_cpu_s = 0.0;
  double save_s = 0.0;        // median save_checkpoint (collective; slowest rank)
  double fresh_init_s = 0.0;  // median Trainer construction from the seed (slowest rank)
  // Median Trainer construction from the checkpoint (slowest rank): the load. Not taken less the
  // fresh time: it reads instead of initialising from the seed, and on the build machines the seed
  // costs more than reading shards just written (still in the page cache).
  double resume_init_s = 0.0;
  std::vector<uint64_t> shard_bytes;  // each rank's shard file, by rank
  uint64_t index_bytes = 0;

  uint64_t total_bytes() const;  // every shard and the index
};

// Trains `spec` for settings.warmup + settings.steps steps, then saves `repeats` times into
// `dir` (each save a fresh step folder: the previous one is removed untimed, so no save pays for
// replacing or pruning) and alternates `repeats` fresh and resumed constructions. `dir` is left
// holding the last checkpoint.
CheckpointResult run_checkpoint_layout(const BenchSettings& settings, const ModeSpec& spec,
                                       const std::string& data_path, const std::string& dir,
                                       int repeats);

}  // namespace meshtrain::bench
