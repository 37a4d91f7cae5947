// A benchmark harness over layouts: the same GPT-2 and global batch on one rank and on four local
// ranks laid out five ways, each run through the library's Trainer, timed after warm-up steps, with
// throughput as a ratio of the single-rank run measured in the same process.
//
// The Trainer is the whole loop (data, micro-batches, clipping, AdamW, metrics reduced over ranks)
// configured in C++ as `meshtrain train` configures it from flags.
#include <meshtrain/core/comm/local/spawn_ranks.h>
#include <meshtrain/core/ops/cpu/cpu_threads.h>
#include <meshtrain/models/token_file.h>
#include <meshtrain/train/trainer.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

using namespace meshtrain;

namespace {

constexpr int kWarmupSteps = 2, kTimedSteps = 5;

struct Measurement {
  double step_ms = 0.0;   // median over the timed steps (slowest rank)
  double tokens_per_s = 0.0;
  double peak_mib = 0.0;  // largest rank
  double comm_mib = 0.0;  // sent per step by the busiest rank on the strategies' axes
};

Measurement measure(TrainConfig config) {
  config.steps = kWarmupSteps + kTimedSteps;
  std::vector<StepMetrics> timed;
  spawn_ranks(config.world, [&](RankContext& ctx) {
    Trainer trainer(config, ctx.world, ctx.memory);
    for (int s = 0; s < config.steps; ++s) {
      const StepMetrics m = trainer.step();  // the same figures on every rank
      if (ctx.rank == 0 && s >= kWarmupSteps) timed.push_back(m);
    }
  });
  std::sort(timed.begin(), timed.end(),
            [](const StepMetrics& a, const StepMetrics& b) { return a.step_time_s < b.step_time_s; });
  const StepMetrics& median = timed[timed.size() / 2];
  return {median.step_time_s * 1e3, median.tokens_per_s, median.peak_mem_bytes / 1048576.0,
          median.comm_bytes / 1048576.0};
}

}  // namespace

int main() {
  // Local ranks split the caller's CPU threads: with one, every rank of every layout computes on
  // one thread, so the layouts compare at equal compute per rank.
  ops::cpu::set_cpu_threads(1);
  // A token file of byte-level text (the model is the byte-level "demo" GPT-2).
  const std::string data = (std::filesystem::temp_directory_path() / "layout_bench.bin").string();
  std::vector<Token> tokens;
  const std::string text = "Every layout trains the same model on the same global batch. ";
  while (tokens.size() < 65536)
    for (const unsigned char c : text) tokens.push_back(c);
  write_token_file(data, tokens);

  TrainConfig base;
  base.model = gpt2_model(gpt2_preset("demo"));
  base.data_path = data;
  base.batch = 8;
  base.seq = 64;
  base.grad_accum = 2;  // two micro-batches: what a pipeline streams
  base.lr.lr = 1e-3f;
  base.sample_bytes = 0;
  base.quiet = true;

  struct Layout {
    const char* mesh;
    int world;
  };
  const std::vector<Layout> layouts = {{"", 1},
                                       {"dp_shard=4", 4},
                                       {"dp_replicate=2,dp_shard=2", 4},
                                       {"dp_shard=2,tp=2", 4},
                                       {"tp=4", 4},
                                       {"pp=2,dp_shard=2", 4}};
  std::printf("%-27s %5s %9s %10s %8s %11s %12s\n", "layout", "ranks", "ms/step", "tokens/s",
              "vs 1", "peak MiB", "comm MiB");
  double single_rank_tokens_per_s = 0.0;
  for (const Layout& layout : layouts) {
    TrainConfig config = base;
    config.world = layout.world;
    if (layout.world > 1) config.mesh = parse_mesh_spec(layout.mesh);
    if (config.mesh.has_axis("dp_replicate")) config.set("fsdp", "mode", "hybrid");
    const Measurement m = measure(config);
    if (layout.world == 1) single_rank_tokens_per_s = m.tokens_per_s;
    std::printf("%-27s %5d %9.1f %10.0f %7.2fx %11.2f %12.3f\n",
                layout.world == 1 ? "one rank" : layout.mesh, layout.world, m.step_ms,
                m.tokens_per_s, m.tokens_per_s / single_rank_tokens_per_s, m.peak_mib, m.comm_mib);
  }
  std::filesystem::remove(data);
  std::printf("(%d warm-up steps, median of %d; each rank on one CPU thread)\n", kWarmupSteps,
              kTimedSteps);
  return 0;
}
