// The end-to-end training benchmark harness shared by fsdp_train_bench and tp_train_bench: one
// parallel layout ("mode") trained at W ranks as threads running Trainer, warm-up steps dropped,
// then medians over the measured steps; plus the Google Benchmark glue that reports each mode
// against the baseline measured in the same run.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "meshtrain/train/train_config.h"

namespace meshtrain::bench {

inline constexpr double kMiB = 1024.0 * 1024.0;

double median(std::vector<double> values);
// CPU seconds of the whole process: every rank and progress thread together.
double process_cpu_seconds();

struct BenchSettings {
  int world = 4;
  int64_t vocab = 256;  // byte-level by default; GPT-2's 50257 for the GPU benchmark
  DeviceKind device = DeviceKind::cpu;
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
  MeshLayout mesh;
  std::map<std::string, TextOptions> strategies;  // plugin options (TrainConfig::strategies)
  ModelSpecPtr model = nullptr;  // null: GPT-2 of the settings' shape
  ActivationCheckpointing ac = {};
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
  // Achieved model FLOP/s: ModelSpec::training_flops of a step's tokens over step_s.
  double model_flops_per_s = 0.0;
};

// Consumes --world --vocab --dim --layers --heads --seq --batch --warmup --steps and
// --device=cpu|cuda (as --name=value) into `settings`; every other argument is left in argv for
// Google Benchmark.
void parse_settings(int& argc, char** argv, BenchSettings& settings);

TrainConfig make_train_config(const BenchSettings& settings, const ModeSpec& spec,
                              const std::string& data_path);
ModeResult run_mode(const BenchSettings& settings, const ModeSpec& spec,
                    const std::string& data_path);

// The results of one program run, in the order the modes ran. Ratios are taken against
// `baseline` as measured in this same run, so that machine load and build flags cancel out.
struct ModeBoard {
  explicit ModeBoard(std::string baseline_name) : baseline(std::move(baseline_name)) {}

  std::string baseline;
  std::vector<std::string> order;
  std::map<std::string, ModeResult> results;

  const ModeResult* base() const;  // null until the baseline has run
};

// The body of one registered benchmark: trains `spec` once, reports the median step time as
// manual time, records the result on `board` and sets the per-mode counters (ratio_vs_<baseline>
// once the baseline, registered first, has run).
void bench_mode(benchmark::State& state, const BenchSettings& settings, const ModeSpec& spec,
                const std::string& data_path, ModeBoard& board);

// Registers a benchmark that trains once: one iteration, manual time in milliseconds.
void register_run(const std::string& name, std::function<void(benchmark::State&)> body);

// Registers `train/<name>` for every spec (register_run).
void register_modes(const std::vector<ModeSpec>& specs, const BenchSettings& settings,
                    const std::string& data_path, ModeBoard& board);

}  // namespace meshtrain::bench
