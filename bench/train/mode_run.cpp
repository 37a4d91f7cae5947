#include "bench/train/mode_run.h"

#include <algorithm>
#include <cstring>
#include <ctime>

#include "meshtrain/train/trainer.h"
#include "meshtrain/core/comm/local/spawn_ranks.h"
#include "meshtrain/core/error.h"

namespace meshtrain::bench {

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

namespace {

// Consumes --name=value; false for any other argument.
bool take_flag(const char* arg, const char* name, int64_t& value) {
  const size_t n = std::strlen(name);
  if (std::strncmp(arg, "--", 2) != 0 || std::strncmp(arg + 2, name, n) != 0 || arg[2 + n] != '=')
    return false;
  value = std::stoll(arg + 3 + n);
  return true;
}

bool take_device(const char* arg, DeviceKind& device) {
  if (std::strncmp(arg, "--device=", 9) != 0) return false;
  const std::string_view value = arg + 9;
  MT_CHECK(value == "cpu" || value == "cuda", "--device: expected cpu or cuda, got '", value, "'");
  device = value == "cuda" ? DeviceKind::cuda : DeviceKind::cpu;
  return true;
}

}  // namespace

void parse_settings(int& argc, char** argv, BenchSettings& settings) {
  int64_t world = settings.world, warmup = settings.warmup, steps = settings.steps;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    const bool mine = take_flag(a, "world", world) || take_flag(a, "vocab", settings.vocab) ||
                      take_device(a, settings.device) || take_flag(a, "dim", settings.dim) ||
                      take_flag(a, "layers", settings.layers) ||
                      take_flag(a, "heads", settings.heads) || take_flag(a, "seq", settings.seq) ||
                      take_flag(a, "batch", settings.batch) || take_flag(a, "warmup", warmup) ||
                      take_flag(a, "steps", steps);
    if (!mine) argv[kept++] = argv[i];
  }
  argc = kept;
  settings.world = static_cast<int>(world);
  settings.warmup = static_cast<int>(warmup);
  settings.steps = static_cast<int>(steps);
}

TrainConfig make_train_config(const BenchSettings& settings, const ModeSpec& spec,
                              const std::string& data_path) {
  TrainConfig config;
  config.model = spec.model ? spec.model
                             : gpt2_model(GPT2Config{.vocab = settings.vocab,
                                                     .ctx = settings.seq,
                                                     .dim = settings.dim,
                                                     .layers = settings.layers,
                                                     .heads = settings.heads});
  config.ac = spec.ac;
  config.device = settings.device;
  config.data_path = data_path;
  config.steps = settings.warmup + settings.steps;
  config.batch = settings.batch;
  config.seq = settings.seq;
  config.world = settings.world;
  config.mesh = spec.mesh;
  config.strategies = spec.strategies;
  config.sample_bytes = 0;
  config.quiet = true;
  config.validate();
  return config;
}

ModeResult run_mode(const BenchSettings& settings, const ModeSpec& spec,
                    const std::string& data_path) {
  MT_CHECK(settings.steps > 0, "--steps (measured steps) must be positive, got ", settings.steps);
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
  const auto step_tokens = static_cast<double>(settings.batch * settings.seq);
  r.step_s = median(step_s);
  r.tokens_per_s = step_tokens / r.step_s;
  r.exposed_comm_s = median(exposed_s);
  r.comm_bytes = median(bytes);
  r.cpu_s = (cpu_end - cpu_start) / settings.steps;
  r.sharded_state_bytes = measured.back().sharded_state_bytes;
  r.final_loss = measured.back().loss;
  r.model_flops_per_s = config.model->training_flops(step_tokens, settings.seq) / r.step_s;
  return r;
}

const ModeResult* ModeBoard::base() const {
  const auto it = results.find(baseline);
  return it == results.end() ? nullptr : &it->second;
}

void bench_mode(benchmark::State& state, const BenchSettings& settings, const ModeSpec& spec,
                const std::string& data_path, ModeBoard& board) {
  ModeResult r;
  for (auto _ : state) {
    r = run_mode(settings, spec, data_path);
    state.SetIterationTime(r.step_s);
  }
  if (!board.results.count(spec.name)) board.order.push_back(spec.name);
  board.results[spec.name] = r;
  state.counters["tok_per_s"] = r.tokens_per_s;
  state.counters["exposed_ms"] = r.exposed_comm_s * 1e3;
  state.counters["peak_MiB_rank"] = r.peak_mem_bytes / kMiB;
  state.counters["sharded_MiB_rank"] = r.sharded_state_bytes / kMiB;
  state.counters["comm_MiB_rank_step"] = r.comm_bytes / kMiB;
  state.counters["cpu_s_step"] = r.cpu_s;
  state.counters["loss"] = r.final_loss;
  if (const ModeResult* base = board.base()) {
    state.counters["ratio_vs_" + board.baseline] = r.step_s / base->step_s;
    state.counters["cpu_ratio_vs_" + board.baseline] = r.cpu_s / base->cpu_s;
  }
}

void register_run(const std::string& name, std::function<void(benchmark::State&)> body) {
  benchmark::RegisterBenchmark(name.c_str(), std::move(body))
      ->Iterations(1)
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond);
}

void register_modes(const std::vector<ModeSpec>& specs, const BenchSettings& settings,
                    const std::string& data_path, ModeBoard& board) {
  for (const ModeSpec& spec : specs)
    register_run("train/" + spec.name, [&settings, &data_path, &board, spec](benchmark::State& s) {
      bench_mode(s, settings, spec, data_path, board);
    });
}

}  // namespace meshtrain::bench
