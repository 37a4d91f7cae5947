#include "bench/checkpoint/checkpoint_run.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>

#include "meshtrain/train/trainer.h"
#include "meshtrain/checkpoint/checkpoint_directory.h"
#include "meshtrain/core/comm/gather_values.h"
#include "meshtrain/core/comm/local/spawn_ranks.h"
#include "meshtrain/core/error.h"

namespace meshtrain::bench {

namespace fs = std::filesystem;

uint64_t CheckpointResult::total_bytes() const {
  uint64_t total = index_bytes;
  for (uint64_t b : shard_bytes) total += b;
  return total;
}

namespace {

// Collective: fn on every rank, started together after a barrier; the slowest rank's seconds.
double timed_collective(Communicator& world, const std::function<void()>& fn) {
  world.barrier()->wait();
  const auto start = std::chrono::steady_clock::now();
  fn();
  const double mine =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::vector<double> all = all_gather_values(world, std::vector<double>{mine});
  return *std::max_element(all.begin(), all.end());
}

}  // namespace

CheckpointResult run_checkpoint_layout(const BenchSettings& settings, const ModeSpec& spec,
                                       const std::string& data_path, const std::string& dir,
                                       int repeats) {
  MT_CHECK(settings.steps > 0, "--steps (measured steps) must be positive, got ", settings.steps);
  MT_CHECK(repeats > 0, "--repeats must be positive, got ", repeats);
  TrainConfig config = make_train_config(settings, spec, data_path);
  config.checkpoint_dir = dir;
  TrainConfig resume = config;
  resume.resume_dir = dir;

  CheckpointResult r;
  std::vector<double> step_s, save_s, fresh_s, resume_s;  // rank 0 records the reduced figures
  spawn_ranks(settings.world, [&](RankContext& ctx) {
    const bool lead = ctx.rank == 0;
    std::optional<Trainer> trainer(std::in_place, config, ctx.world, ctx.memory);
    for (int s = 0; s < settings.warmup; ++s) trainer->step();
    // Each step ends in a collective, so rank 0's CPU clock brackets every rank's measured steps.
    const double cpu_start = process_cpu_seconds();
    for (int s = 0; s < settings.steps; ++s) {
      const StepMetrics m = trainer->step();
      if (lead) step_s.push_back(m.step_time_s);
    }
    if (lead) r.step_cpu_s = (process_cpu_seconds() - cpu_start) / settings.steps;

    for (int i = 0; i < repeats; ++i) {
      std::string path;
      const double t = timed_collective(ctx.world, [&] { path = trainer->save_checkpoint(); });
      if (!lead) continue;
      save_s.push_back(t);
      // Sizes from the last save (every save writes the same state); earlier ones are removed
      // before the next save's barrier, which rank 0 joins only afterwards.
      if (i + 1 < repeats) {
        fs::remove_all(path);
        continue;
      }
      for (int k = 0; k < ctx.world_size; ++k)
        r.shard_bytes.push_back(fs::file_size(fs::path(path) / shard_file_name(k)));
      r.index_bytes = fs::file_size(fs::path(path) / kCheckpointIndexFile);
    }
    trainer.reset();

    // Alternated, so that both see the same allocator cache and machine load; destruction is
    // left outside the timed part.
    for (int i = 0; i < repeats; ++i) {
      const double fresh =
          timed_collective(ctx.world, [&] { trainer.emplace(config, ctx.world, ctx.memory); });
      trainer.reset();
      const double resumed =
          timed_collective(ctx.world, [&] { trainer.emplace(resume, ctx.world, ctx.memory); });
      MT_ASSERT_EQ(trainer->steps_done(), settings.warmup + settings.steps,
                   "the resumed Trainer must continue at the saved step");
      trainer.reset();
      if (lead) {
        fresh_s.push_back(fresh);
        resume_s.push_back(resumed);
      }
    }
  });

  r.step_s = median(step_s);
  r.save_s = median(save_s);
  r.fresh_init_s = median(fresh_s);
  r.resume_init_s = median(resume_s);
  return r;
}

}  // namespace meshtrain::bench
