// End-to-end tensor-parallel training benchmark: GPT-2 (byte-level vocab) trained on the local
// backend at one world size W for each layout — pure DDP (tp1, the ratio base), Megatron TP over
// 2 and 4 ranks with DDP on the rest, each with and without sequence parallelism, and FSDP over the
// data ranks of tp=2 — in one run, reported side by side. Equal W keeps the compute per step equal,
// so what differs is how it is split and what that costs in communication and memory. Manual time
// is the median step time over the measured steps (warm-up excluded).
//
//   tp_train_bench [--world=4] [--dim=256] [--layers=4] [--heads=8] [--seq=64] [--batch=16]
//                  [--warmup=2] [--steps=10] [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "bench/train/mode_run.h"
#include "bench/train/token_corpus.h"

namespace meshtrain::bench {
namespace {

// Smaller than the FSDP bench's model, so that seven layouts fit in under a minute on two cores;
// ten measured steps because step-time medians over five wobble on a shared two-core machine.
BenchSettings g_settings{.world = 4, .dim = 256, .layers = 4, .heads = 8, .steps = 10};
std::string g_data_path;
ModeBoard g_board("tp1");  // registered first

// dp_shard=W/tp then tp=tp, size-1 axes left out except tp1's dp_shard ("tp4" at W=4 is the mesh
// tp=4), with options only for the plugins that mesh binds (the trainer rejects options for a
// plugin with no axis).
ModeSpec tp_mode(std::string name, int world, int tp, const char* fsdp_mode, bool sp) {
  ModeSpec spec{std::move(name), {}, {}};
  std::vector<MeshAxis> axes;
  if (world / tp > 1 || tp == 1) {
    axes.push_back({"dp_shard", world / tp});
    spec.strategies["fsdp"] = {{"mode", fsdp_mode}};
  }
  if (tp > 1) {
    axes.push_back({"tp", tp});
    spec.strategies["tp"] = {{"sequence_parallel", sp ? "true" : "false"}};
  }
  spec.mesh = MeshLayout(axes);
  return spec;
}

// Every TP degree that divides both the world and the heads (TP splits heads), so that --world
// and --heads can shrink the set instead of failing; FSDP x TP only where the data axis is > 1.
std::vector<ModeSpec> tp_modes(const BenchSettings& s) {
  std::vector<ModeSpec> modes = {tp_mode("tp1", s.world, 1, "none", false)};
  for (int tp : {2, 4}) {
    if (s.world % tp != 0 || s.heads % tp != 0) continue;
    const std::string name = "tp" + std::to_string(tp);
    modes.push_back(tp_mode(name, s.world, tp, "none", false));
    modes.push_back(tp_mode(name + "_sp", s.world, tp, "none", true));
  }
  if (s.world % 2 == 0 && s.world / 2 > 1 && s.heads % 2 == 0) {
    const std::string name = "fsdp" + std::to_string(s.world / 2) + "_tp2";
    modes.push_back(tp_mode(name, s.world, 2, "full", false));
    modes.push_back(tp_mode(name + "_sp", s.world, 2, "full", true));
  }
  return modes;
}

void print_summary(const std::vector<ModeSpec>& modes) {
  const ModeResult* base = g_board.base();
  std::printf("\n%-13s %-16s %8s %7s %8s %10s %7s %18s %13s %16s %7s\n", "layout", "mesh",
              "step ms", "vs tp1", "tok/s", "cpu s/step", "cpu vs", "comm MiB/rank/step",
              "peak MiB/rank", "sharded MiB/rank", "loss");
  for (const ModeSpec& spec : modes) {
    const auto found = g_board.results.find(spec.name);
    if (found == g_board.results.end()) continue;  // filtered out
    const ModeResult& r = found->second;
    char ratio[16] = "-", cpu_ratio[16] = "-";
    if (base) {
      std::snprintf(ratio, sizeof ratio, "%.3f", r.step_s / base->step_s);
      std::snprintf(cpu_ratio, sizeof cpu_ratio, "%.3f", r.cpu_s / base->cpu_s);
    }
    std::printf("%-13s %-16s %8.1f %7s %8.0f %10.3f %7s %18.2f %13.1f %16.2f %7.4f\n",
                spec.name.c_str(), spec.mesh.to_string().c_str(), r.step_s * 1e3, ratio,
                r.tokens_per_s, r.cpu_s, cpu_ratio, r.comm_bytes / kMiB, r.peak_mem_bytes / kMiB,
                r.sharded_state_bytes / kMiB, r.final_loss);
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
  const std::vector<ModeSpec> modes = tp_modes(s);
  const meshtrain::GPT2Config model = meshtrain::gpt2_config(*make_train_config(s, modes.front(), g_data_path).model);
  std::printf("tp_train_bench: W=%d %s (%.2fM params), batch %lld x seq %lld, %d warm-up + %d "
              "measured steps, %lld tokens of data\n",
              s.world, model.describe().c_str(), model.num_parameters() / 1e6,
              static_cast<long long>(s.batch), static_cast<long long>(s.seq), s.warmup, s.steps,
              static_cast<long long>(corpus.tokens()));

  register_modes(modes, s, g_data_path, g_board);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  print_summary(modes);
  return 0;
}
