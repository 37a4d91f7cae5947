// Checkpoint benchmark: the FSDP benchmark's GPT-2 (byte-level vocab) trained on the local backend
// at W ranks, then saved as a distributed checkpoint (parameters and AdamW moments, one shard per
// rank) and resumed from it, for FSDP full over dp_shard=W and FSDP x TP over dp_shard=W/2,tp=2,
// in one run. Manual time is the median save time; beside it the median step time, the median
// Trainer construction fresh and from the checkpoint, and the bytes each rank wrote.
//
//   checkpoint_bench [--world=4] [--dim=512] [--layers=6] [--heads=8] [--seq=64] [--batch=16]
//                    [--warmup=2] [--steps=5] [--repeats=5] [--dir=/tmp] [--benchmark_filter=...]
//
// The checkpoints go to a fresh folder under --dir, removed at the end.
#include <benchmark/benchmark.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "bench/checkpoint/checkpoint_run.h"
#include "bench/train/token_corpus.h"
#include "meshtrain/core/error.h"

namespace meshtrain::bench {
namespace {

namespace fs = std::filesystem;

BenchSettings g_settings;
int g_repeats = 5;
std::string g_parent = fs::temp_directory_path().string();
std::string g_data_path;
std::string g_scratch;  // this run's folder under g_parent
std::vector<std::string> g_order;
std::map<std::string, std::pair<ModeSpec, CheckpointResult>> g_results;

// Consumes --repeats= and --dir=; other arguments stay for parse_settings and Google Benchmark.
void parse_checkpoint_flags(int& argc, char** argv) {
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--repeats=", 10) == 0)
      g_repeats = std::stoi(argv[i] + 10);
    else if (std::strncmp(argv[i], "--dir=", 6) == 0)
      g_parent = argv[i] + 6;
    else
      argv[kept++] = argv[i];
  }
  argc = kept;
}

// FSDP full over dp_shard=W; FSDP x TP over dp_shard=W/2,tp=2 where W and the heads allow it.
std::vector<ModeSpec> checkpoint_layouts(const BenchSettings& s) {
  const auto full = std::map<std::string, TextOptions>{{"fsdp", {{"mode", "full"}}}};
  std::vector<ModeSpec> layouts = {{"full", MeshLayout({{"dp_shard", s.world}}), full}};
  if (s.world % 2 == 0 && s.world / 2 > 1 && s.heads % 2 == 0)
    layouts.push_back({"fsdp" + std::to_string(s.world / 2) + "_tp2",
                       MeshLayout({{"dp_shard", s.world / 2}, {"tp", 2}}), full});
  return layouts;
}

void bench_layout(benchmark::State& state, const ModeSpec& spec) {
  const std::string dir = (fs::path(g_scratch) / spec.name).string();
  CheckpointResult r;
  for (auto _ : state) {
    r = run_checkpoint_layout(g_settings, spec, g_data_path, dir, g_repeats);
    state.SetIterationTime(r.save_s);
  }
  fs::remove_all(dir);
  if (!g_results.count(spec.name)) g_order.push_back(spec.name);
  g_results.insert_or_assign(spec.name, std::make_pair(spec, r));
  state.counters["step_ms"] = r.step_s * 1e3;
  state.counters["step_cpu_s"] = r.step_cpu_s;
  state.counters["save_vs_step"] = r.save_s / r.step_s;
  state.counters["write_MB_s"] = r.total_bytes() / kMB / r.save_s;
  state.counters["fresh_init_ms"] = r.fresh_init_s * 1e3;
  state.counters["resume_init_ms"] = r.resume_init_s * 1e3;
  state.counters["resume_vs_fresh"] = r.resume_init_s / r.fresh_init_s;
  state.counters["MB_rank_max"] =
      *std::max_element(r.shard_bytes.begin(), r.shard_bytes.end()) / kMB;
  state.counters["total_MB"] = r.total_bytes() / kMB;
}

void print_summary() {
  std::printf("\n%-10s %-16s %8s %10s %8s %9s %10s %13s %14s %12s %-27s %9s %9s\n", "layout",
              "mesh", "step ms", "cpu s/step", "save ms", "save/step", "write MB/s",
              "fresh init ms", "resume init ms", "resume/fresh", "MB/rank (shard files)",
              "total MB", "index KB");
  for (const std::string& name : g_order) {
    const auto& [spec, r] = g_results.at(name);
    std::string per_rank;
    for (uint64_t b : r.shard_bytes) {
      char part[16];
      std::snprintf(part, sizeof part, "%s%.2f", per_rank.empty() ? "" : "/", b / kMB);
      per_rank += part;
    }
    std::printf(
        "%-10s %-16s %8.1f %10.2f %8.1f %9.2f %10.0f %13.1f %14.1f %12.2f %-27s %9.2f %9.1f\n",
        name.c_str(), spec.mesh.to_string().c_str(), r.step_s * 1e3, r.step_cpu_s, r.save_s * 1e3,
        r.save_s / r.step_s, r.total_bytes() / kMB / r.save_s, r.fresh_init_s * 1e3,
        r.resume_init_s * 1e3, r.resume_init_s / r.fresh_init_s, per_rank.c_str(),
        r.total_bytes() / kMB, r.index_bytes / 1e3);
  }
}

}  // namespace
}  // namespace meshtrain::bench

int main(int argc, char** argv) {
  using namespace meshtrain::bench;
  parse_checkpoint_flags(argc, argv);
  parse_settings(argc, argv, g_settings);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;

  const BenchSettings& s = g_settings;
  TokenCorpus corpus(s.batch * (s.seq + 1) * 4);
  g_data_path = corpus.path();
  std::string tmpl = (fs::path(g_parent) / "meshtrain_checkpoint_bench_XXXXXX").string();
  MT_CHECK(mkdtemp(tmpl.data()) != nullptr, "cannot create a folder from ", tmpl);
  g_scratch = tmpl;

  const std::vector<ModeSpec> layouts = checkpoint_layouts(s);
  const meshtrain::GPT2Config model = meshtrain::gpt2_config(*make_train_config(s, layouts.front(), g_data_path).model);
  // Parameters and both AdamW moments in f32: what the shards hold, less their headers.
  const double state_mb = 3.0 * 4.0 * static_cast<double>(model.num_parameters()) / kMB;
  std::printf(
      "checkpoint_bench: W=%d %s (%.1fM params, %.1f MB of parameters + AdamW state), "
      "batch %lld x seq %lld, %d warm-up + %d measured steps, %d saves and loads, in %s\n",
      s.world, model.describe().c_str(), model.num_parameters() / 1e6, state_mb,
      static_cast<long long>(s.batch), static_cast<long long>(s.seq), s.warmup, s.steps, g_repeats,
      g_scratch.c_str());

  for (const ModeSpec& spec : layouts)
    register_run("checkpoint/" + spec.name,
                 [spec](benchmark::State& state) { bench_layout(state, spec); });
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  fs::remove_all(g_scratch);
  print_summary();
  return 0;
}
