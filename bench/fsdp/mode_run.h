// One FSDP mode trained end to end: W ranks as threads running Trainer, warm-up steps dropped,
// then medians over the measured steps.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "apps/train/train_config.h"

namespace meshtrain::bench {

struct BenchSettings {
  int world = 4;
  int64_t dim = 512;
  int64_t layers = 6;
  int64_t heads = 8;
  int64_t seq = 64;
  int64_t batch = 16;  // global sequences per step
  int warmup = 2;
  int steps = 5;  // measured steps
};

struct ModeSpec {
  std::string name;
  FsdpMode mode;
  MeshLayout mesh;
};

struct ModeResult {
  double step_s = 0.0;           // median over measured steps (slowest rank)
  double tokens_per_s = 0.0;     // global tokens / step_s
  double exposed_comm_s = 0.0;   // median, slowest rank
  double comm_bytes = 0.0;       // median bytes sent per step, busiest rank
  // Process CPU time per measured step, all ranks and progress threads together: the work done,
  // which other load on the machine disturbs far less than wall time.
  double cpu_s = 0.0;
  uint64_t peak_mem_bytes = 0;   // largest over ranks and measured steps
  uint64_t sharded_state_bytes = 0;  // params + grads + optimizer per rank, last step
  double final_loss = 0.0;       // equal across modes up to rounding: a correctness sanity check
};

// none (DDP), full, grad_op over dp_shard=W; hybrid over dp_replicate=2 x dp_shard=W/2.
std::vector<ModeSpec> bench_modes(int world);

TrainConfig make_train_config(const BenchSettings& settings, const ModeSpec& spec,
                              const std::string& data_path);
ModeResult run_mode(const BenchSettings& settings, const ModeSpec& spec,
                    const std::string& data_path);

}  // namespace meshtrain::bench
