// Acceptance: training the demo preset on the demo corpus on one rank lowers the loss clearly
// within a few hundred steps, in f32 and in bf16 mixed precision alike.
#include <chrono>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <sstream>

#include <gtest/gtest.h>

#include "meshtrain/train/run_training.h"
#include "tests/apps/apps_test_support.h"

namespace meshtrain {
namespace {

using testing::ScratchDir;

double mean_loss(const std::vector<StepMetrics>& steps, size_t begin, size_t end) {
  double sum = 0.0;
  for (size_t i = begin; i < end; ++i) sum += steps[i].loss;
  return sum / static_cast<double>(end - begin);
}

// The demo run of these tests: 200 steps of 8 x 64 tokens on one rank (FSDP over a one-rank data
// axis, so that its mixed precision applies), with the given parameter dtype.
TrainConfig demo_config(const std::string& data_path, const std::string& param_dtype) {
  TrainConfig c;
  c.model = gpt2_model(gpt2_preset("demo"));  // byte-level: vocab 256
  c.data_path = data_path;
  c.steps = 200;
  c.batch = 8;
  c.seq = 64;
  c.lr.lr = 1e-3f;
  c.clip = 1.0f;  // as the demo: without it a loss spike early on makes the curve chaotic
  c.sample_bytes = 0;
  c.quiet = true;
  if (param_dtype != "f32") c.set("fsdp", "param_dtype", param_dtype);
  return c;
}

std::string demo_tokens(const ScratchDir& dir) {
  const std::string corpus = MESHTRAIN_DEMO_CORPUS;
  EXPECT_TRUE(std::filesystem::exists(corpus)) << corpus;
  const std::string path = dir.file("demo.bin");
  EXPECT_GT(prepare_byte_tokens(corpus, path), 100000);
  return path;
}

TEST(DemoConvergence, LossFallsWellBelowUniformOnOneRank) {
  ScratchDir dir;
  const TrainConfig c = demo_config(demo_tokens(dir), "f32");
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

// Mixed precision (bf16 parameters, activations and gradients; fp32 masters and AdamW) follows the
// f32 loss curve: after 200 steps the mean of the last 20 losses is within 2% of f32's.
TEST(DemoConvergence, Bf16LossCurveTracksF32) {
  ScratchDir dir;
  const std::string tokens = demo_tokens(dir);
  std::ostringstream out;
  const std::vector<StepMetrics> f32 = run_training(demo_config(tokens, "f32"), out, false);
  const std::vector<StepMetrics> bf16 = run_training(demo_config(tokens, "bf16"), out, false);
  ASSERT_EQ(f32.size(), 200u);
  ASSERT_EQ(bf16.size(), 200u);
  const double f32_last20 = mean_loss(f32, 180, 200), bf16_last20 = mean_loss(bf16, 180, 200);
  std::cout << "demo after 200 steps (mean of the last 20): f32 " << f32_last20 << ", bf16 "
            << bf16_last20 << " (" << 100.0 * (bf16_last20 / f32_last20 - 1.0) << "%)\n";
  EXPECT_NEAR(bf16_last20, f32_last20, 0.02 * f32_last20);
  // The first step sees the same parameters, rounded to bf16: the losses differ only by rounding.
  EXPECT_NEAR(bf16.front().loss, f32.front().loss, 0.01 * f32.front().loss);
  EXPECT_NE(bf16.front().loss, f32.front().loss) << "bf16 compute leaves a trace of its rounding";
}

}  // namespace
}  // namespace meshtrain
