#include "bench/fsdp/mode_run.h"

#include <algorithm>
#include <ctime>

#include "apps/train/trainer.h"
#include "core/comm/local/spawn_ranks.h"
#include "core/error.h"

namespace meshtrain::bench {

namespace {

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

}  // namespace

std::vector<ModeSpec> bench_modes(int world) {
  const MeshLayout flat({{"dp_shard", world}});
  std::vector<ModeSpec> modes = {{"none", FsdpMode::none, flat},
                                 {"full", FsdpMode::full, flat},
                                 {"grad_op", FsdpMode::grad_op, flat}};
  if (world % 2 == 0 && world >= 4)
    modes.push_back({"hybrid", FsdpMode::hybrid,
                     MeshLayout({{"dp_replicate", 2}, {"dp_shard", world / 2}})});
  return modes;
}

TrainConfig make_train_config(const BenchSettings& settings, const ModeSpec& spec,
                              const std::string& data_path) {
  TrainConfig config;
  config.model = GPT2Config{.vocab = 256, .ctx = settings.seq, .dim = settings.dim,
                            .layers = settings.layers, .heads = settings.heads};
  config.data_path = data_path;
  config.steps = settings.warmup + settings.steps;
  config.batch = settings.batch;
  config.seq = settings.seq;
  config.world = settings.world;
  config.mesh = spec.mesh;
  config.fsdp.mode = spec.mode;
  config.sample_bytes = 0;
  config.quiet = true;
  config.validate();
  return config;
}

ModeResult run_mode(const BenchSettings& settings, const ModeSpec& spec,
                    const std::string& data_path) {
  MT_CHECK_GT(settings.steps, 0, "--steps (measured steps) must be positive");
  const TrainConfig config = make_train_config(settings, spec, data_path);
  std::vector<StepMetrics> measured;  // rank 0's view; every field is already reduced over ranks
  double cpu_start = 0.0, cpu_end = 0.0;
  spawn_ranks(settings.world, [&](RankContext& ctx) {
    Trainer trainer(config, ctx.world, ctx.memory);
    for (int s = 0; s < settings.warmup; ++s) trainer.step();
    // Each step ends in a collective, so rank 0's clock brackets every rank's measured steps.
    if (ctx.rank == 0) cpu_start = process_cpu_seconds();
    for (int s = 0; s < settings.steps; ++s) {
      StepMetrics m = trainer.step();
      if (ctx.rank == 0) measured.push_back(std::move(m));
    }
    if (ctx.rank == 0) cpu_end = process_cpu_seconds();
  });

  std::vector<double> step_s, exposed_s, bytes;
  ModeResult r;
  for (const StepMetrics& m : measured) {
    step_s.push_back(m.step_time_s);
    exposed_s.push_back(m.exposed_comm_s);
    bytes.push_back(static_cast<double>(m.comm_bytes));
    r.peak_mem_bytes = std::max(r.peak_mem_bytes, m.peak_mem_bytes);
  }
  r.step_s = median(step_s);
  r.tokens_per_s = static_cast<double>(settings.batch * settings.seq) / r.step_s;
  r.exposed_comm_s = median(exposed_s);
  r.comm_bytes = median(bytes);
  r.cpu_s = (cpu_end - cpu_start) / settings.steps;
  r.sharded_state_bytes = measured.back().sharded_state_bytes;
  r.final_loss = measured.back().loss;
  return r;
}

}  // namespace meshtrain::bench
