// Training with more CPU threads per rank than this machine has cores, run after run: every run
// ends, and its losses are bitwise those of one thread per rank (the kernels' results do not
// depend on the thread count). Issue 25's thread-team race hung or changed these runs. CI repeats
// each layout a few times; MESHTRAIN_STRESS_RUNS=100 makes it the full stress.
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "meshtrain/train/run_training.h"
#include "tests/apps/apps_test_support.h"

namespace meshtrain {
namespace {

int stress_runs() {
  const char* runs = std::getenv("MESHTRAIN_STRESS_RUNS");
  return runs ? std::max(1, std::atoi(runs)) : 3;
}

// The demo model: its kernels split into jobs of every width up to the thread count.
std::vector<double> losses(const testing::ScratchDir& dir, int world, int threads) {
  TrainConfig c;
  c.model = gpt2_model(gpt2_preset("demo"));
  c.data_path = dir.file("tokens.bin");
  c.steps = 3;
  c.batch = 8;
  c.seq = 64;
  c.world = world;
  c.threads = threads;
  c.clip = 1.0f;
  c.sample_bytes = 0;
  c.quiet = true;
  std::ostringstream out;
  std::vector<double> result;
  for (const StepMetrics& m : run_training(c, out, false)) {
    result.push_back(m.loss);
    result.push_back(m.grad_norm);
  }
  return result;
}

class ThreadStress : public ::testing::TestWithParam<std::pair<int, int>> {};

TEST_P(ThreadStress, EveryRunEndsWithTheOneThreadLosses) {
  const auto [world, threads] = GetParam();
  testing::ScratchDir dir;
  const std::string text = testing::sample_prose(40);
  write_token_file(dir.file("tokens.bin"), testing::tokens_from_text(text, 256));
  const std::vector<double> reference = losses(dir, world, 1);
  const int runs = stress_runs();
  for (int run = 0; run < runs; ++run)
    ASSERT_EQ(losses(dir, world, threads), reference) << "run " << run + 1 << " of " << runs;
}

INSTANTIATE_TEST_SUITE_P(Layouts, ThreadStress,
                         ::testing::Values(std::pair{1, 8}, std::pair{2, 4}),
                         [](const auto& info) {
                           return "world" + std::to_string(info.param.first) + "_threads" +
                                  std::to_string(info.param.second);
                         });

}  // namespace
}  // namespace meshtrain
