// End-to-end FSDP training benchmark: GPT-2 (byte-level vocab) trained on the local backend at W
// ranks for each mode — none (the DDP baseline), full, grad_op, hybrid — in one run, reported
// side by side. Manual time is the median step time over the measured steps (warm-up excluded).
//
//   fsdp_train_bench [--world=4] [--dim=512] [--layers=6] [--heads=8] [--seq=64] [--batch=16]
//                    [--warmup=2] [--steps=5] [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <string>

#include "bench/fsdp/mode_run.h"
#include "bench/fsdp/token_corpus.h"

namespace meshtrain::bench {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

BenchSettings g_settings;
std::string g_data_path;
std::vector<std::string> g_order;              // modes in the order they ran
std::map<std::string, ModeResult> g_results;   // by mode name

void train_mode(benchmark::State& state, const ModeSpec& spec) {
  ModeResult r;
  for (auto _ : state) {
    r = run_mode(g_settings, spec, g_data_path);
    state.SetIterationTime(r.step_s);
  }
  if (!g_results.count(spec.name)) g_order.push_back(spec.name);
  g_results[spec.name] = r;
  state.counters["tok_per_s"] = r.tokens_per_s;
  state.counters["exposed_ms"] = r.exposed_comm_s * 1e3;
  state.counters["peak_MiB_rank"] = r.peak_mem_bytes / kMiB;
  state.counters["sharded_MiB_rank"] = r.sharded_state_bytes / kMiB;
  state.counters["comm_MiB_rank_step"] = r.comm_bytes / kMiB;
  state.counters["cpu_s_step"] = r.cpu_s;
  state.counters["loss"] = r.final_loss;
  // The ratio needs the baseline of this run: none is registered first.
  if (auto none = g_results.find("none"); none != g_results.end()) {
    state.counters["ratio_vs_none"] = r.step_s / none->second.step_s;
    state.counters["cpu_ratio_vs_none"] = r.cpu_s / none->second.cpu_s;
  }
}

void print_summary() {
  const auto none = g_results.find("none");
  std::printf("\n%-8s %8s %8s %10s %8s %10s %13s %16s %18s %7s\n", "mode", "tok/s", "vs none",
              "cpu s/step", "cpu vs", "exposed ms", "peak MiB/rank", "sharded MiB/rank",
              "comm MiB/rank/step", "loss");
  for (const std::string& name : g_order) {
    const ModeResult& r = g_results.at(name);
    char ratio[16] = "-", cpu_ratio[16] = "-";
    if (none != g_results.end()) {
      std::snprintf(ratio, sizeof ratio, "%.3f", r.step_s / none->second.step_s);
      std::snprintf(cpu_ratio, sizeof cpu_ratio, "%.3f", r.cpu_s / none->second.cpu_s);
    }
    std::printf("%-8s %8.0f %8s %10.2f %8s %10.1f %13.1f %16.1f %18.1f %7.4f\n", name.c_str(),
                r.tokens_per_s, ratio, r.cpu_s, cpu_ratio, r.exposed_comm_s * 1e3,
                r.peak_mem_bytes / kMiB, r.sharded_state_bytes / kMiB, r.comm_bytes / kMiB,
                r.final_loss);
  }
}

// Consumes --name=value for the settings; everything else is left for Google Benchmark.
bool take_flag(const char* arg, const char* name, int64_t& value) {
  const size_t n = std::strlen(name);
  if (std::strncmp(arg, "--", 2) != 0 || std::strncmp(arg + 2, name, n) != 0 || arg[2 + n] != '=')
    return false;
  value = std::stoll(arg + 3 + n);
  return true;
}

void parse_settings(int& argc, char** argv) {
  int64_t world = g_settings.world, warmup = g_settings.warmup, steps = g_settings.steps;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    const bool mine = take_flag(a, "world", world) || take_flag(a, "dim", g_settings.dim) ||
                      take_flag(a, "layers", g_settings.layers) ||
                      take_flag(a, "heads", g_settings.heads) ||
                      take_flag(a, "seq", g_settings.seq) ||
                      take_flag(a, "batch", g_settings.batch) ||
                      take_flag(a, "warmup", warmup) || take_flag(a, "steps", steps);
    if (!mine) argv[kept++] = argv[i];
  }
  argc = kept;
  g_settings.world = static_cast<int>(world);
  g_settings.warmup = static_cast<int>(warmup);
  g_settings.steps = static_cast<int>(steps);
}

}  // namespace
}  // namespace meshtrain::bench

int main(int argc, char** argv) {
  using namespace meshtrain::bench;
  parse_settings(argc, argv);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;

  const BenchSettings& s = g_settings;
  // At least a few global batches of text, so that steps read different data.
  TokenCorpus corpus(s.batch * (s.seq + 1) * 4);
  g_data_path = corpus.path();
  const meshtrain::GPT2Config model =
      make_train_config(s, bench_modes(s.world).front(), g_data_path).model;
  std::printf("fsdp_train_bench: W=%d %s (%.1fM params), batch %lld x seq %lld, %d warm-up + %d "
              "measured steps, %lld tokens of data\n",
              s.world, model.describe().c_str(), model.num_parameters() / 1e6,
              static_cast<long long>(s.batch), static_cast<long long>(s.seq), s.warmup, s.steps,
              static_cast<long long>(corpus.tokens()));

  for (const ModeSpec& spec : bench_modes(s.world))
    benchmark::RegisterBenchmark(("train/" + spec.name).c_str(), train_mode, spec)
        ->Iterations(1)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  print_summary();
  return 0;
}
