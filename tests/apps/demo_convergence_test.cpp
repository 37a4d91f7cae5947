// Acceptance: training the demo preset on the demo corpus on one rank lowers the loss clearly
// within a few hundred steps.
#include <chrono>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <sstream>

#include <gtest/gtest.h>

#include "apps/train/run_training.h"
#include "tests/apps/apps_test_support.h"

namespace meshtrain {
namespace {

using testing::ScratchDir;

double mean_loss(const std::vector<StepMetrics>& steps, size_t begin, size_t end) {
  double sum = 0.0;
  for (size_t i = begin; i < end; ++i) sum += steps[i].loss;
  return sum / static_cast<double>(end - begin);
}

TEST(DemoConvergence, LossFallsWellBelowUniformOnOneRank) {
  const std::string corpus = MESHTRAIN_DEMO_CORPUS;
  ASSERT_TRUE(std::filesystem::exists(corpus)) << corpus;
  ScratchDir dir;
  TrainConfig c;
  c.model = gpt2_preset("demo");  // byte-level: vocab 256
  c.data_path = dir.file("demo.bin");
  ASSERT_GT(prepare_byte_tokens(corpus, c.data_path), 100000);
  c.steps = 200;
  c.batch = 8;
  c.seq = 64;
  c.lr.lr = 1e-3f;
  c.sample_bytes = 0;
  c.quiet = true;

  const auto start = std::chrono::steady_clock::now();
  std::ostringstream out;
  const std::vector<StepMetrics> steps = run_training(c, out, false);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(steps.size(), 200u);

  const double uniform = std::log(256.0);
  const double first = steps.front().loss;
  const double last20 = mean_loss(steps, steps.size() - 20, steps.size());
  RecordProperty("first_loss", std::to_string(first));
  RecordProperty("last20_mean_loss", std::to_string(last20));
  RecordProperty("seconds", std::to_string(seconds));
  std::cout << "demo: loss " << first << " -> " << last20 << " (mean of the last 20 steps) in "
            << seconds << " s\n";
  EXPECT_NEAR(first, uniform, 0.3) << "the run starts near-uniform";
  EXPECT_LT(last20, 0.75 * uniform);
  for (const StepMetrics& m : steps) ASSERT_TRUE(std::isfinite(m.loss)) << "step " << m.step;
}

}  // namespace
}  // namespace meshtrain
