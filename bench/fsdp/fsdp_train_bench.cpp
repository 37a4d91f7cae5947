// End-to-end FSDP training benchmark: GPT-2 (byte-level vocab) trained on the local backend at W
// ranks for each mode — none (the DDP baseline), full, grad_op, hybrid — in one run, reported
// side by side. Manual time is the median step time over the measured steps (warm-up excluded).
//
//   fsdp_train_bench [--world=4] [--dim=512] [--layers=6] [--heads=8] [--seq=64] [--batch=16]
//                    [--warmup=2] [--steps=5] [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "bench/train/mode_run.h"
#include "bench/train/token_corpus.h"

namespace meshtrain::bench {
namespace {

BenchSettings g_settings;
std::string g_data_path;
ModeBoard g_board("none");  // none (DDP) is registered first

// none (DDP), full, grad_op over dp_shard=W; hybrid over dp_replicate=2 x dp_shard=W/2.
std::vector<ModeSpec> bench_modes(int world) {
  const MeshLayout flat({{"dp_shard", world}});
  const auto fsdp = [](const char* mode) {
    return std::map<std::string, TextOptions>{{"fsdp", {{"mode", mode}}}};
  };
  std::vector<ModeSpec> modes = {
      {"none", flat, fsdp("none")}, {"full", flat, fsdp("full")}, {"grad_op", flat, fsdp("grad_op")}};
  if (world % 2 == 0 && world >= 4)
    modes.push_back({"hybrid", MeshLayout({{"dp_replicate", 2}, {"dp_shard", world / 2}}),
                     fsdp("hybrid")});
  return modes;
}

void print_summary() {
  const ModeResult* none = g_board.base();
  std::printf("\n%-8s %8s %8s %10s %8s %10s %13s %16s %18s %7s\n", "mode", "tok/s", "vs none",
              "cpu s/step", "cpu vs", "exposed ms", "peak MiB/rank", "sharded MiB/rank",
              "comm MiB/rank/step", "loss");
  for (const std::string& name : g_board.order) {
    const ModeResult& r = g_board.results.at(name);
    char ratio[16] = "-", cpu_ratio[16] = "-";
    if (none) {
      std::snprintf(ratio, sizeof ratio, "%.3f", r.step_s / none->step_s);
      std::snprintf(cpu_ratio, sizeof cpu_ratio, "%.3f", r.cpu_s / none->cpu_s);
    }
    std::printf("%-8s %8.0f %8s %10.2f %8s %10.1f %13.1f %16.1f %18.1f %7.4f\n", name.c_str(),
                r.tokens_per_s, ratio, r.cpu_s, cpu_ratio, r.exposed_comm_s * 1e3,
                r.peak_mem_bytes / kMiB, r.sharded_state_bytes / kMiB, r.comm_bytes / kMiB,
                r.final_loss);
  }
}

}  // namespace
}  // namespace meshtrain::bench

int main(int argc, char** argv) {
  using namespace meshtrain::bench;
  parse_settings(argc, argv, g_settings);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;

  const BenchSettings& s = g_settings;
  // At least a few global batches of text, so that steps read different data.
  TokenCorpus corpus(s.batch * (s.seq + 1) * 4);
  g_data_path = corpus.path();
  const meshtrain::GPT2Config model =
      meshtrain::gpt2_config(*make_train_config(s, bench_modes(s.world).front(), g_data_path).model);
  std::printf("fsdp_train_bench: W=%d %s (%.1fM params), batch %lld x seq %lld, %d warm-up + %d "
              "measured steps, %lld tokens of data\n",
              s.world, model.describe().c_str(), model.num_parameters() / 1e6,
              static_cast<long long>(s.batch), static_cast<long long>(s.seq), s.warmup, s.steps,
              static_cast<long long>(corpus.tokens()));

  register_modes(bench_modes(s.world), s, g_data_path, g_board);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  print_summary();
  return 0;
}
