// A short training run through run_training: the returned metrics and the metrics file (JSON
// lines, one object per step).
#include "meshtrain/train/run_training.h"

#include <cmath>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "meshtrain/train/trainer.h"
#include "meshtrain/core/comm/local/spawn_ranks.h"
#include "meshtrain/plugins/fsdp/fsdp_strategy.h"
#include "tests/apps/apps_test_support.h"
#include "tests/support/error_message.h"

namespace meshtrain {
namespace {

using ::testing::HasSubstr;
using testing::ScratchDir;

TrainConfig tiny_config(const ScratchDir& dir, int world) {
  return testing::tiny_train_config(dir, world, 4);
}

TEST(TrainingRun, MetricsFileHasOneJsonObjectPerStep) {
  ScratchDir dir;
  TrainConfig c = tiny_config(dir, 2);
  c.metrics_path = dir.file("metrics.jsonl");
  c.clip = 1.0f;  // so grad_norm is computed and reported
  std::ostringstream out;
  const std::vector<StepMetrics> steps = run_training(c, out, false);
  EXPECT_EQ(out.str(), "") << "quiet runs print nothing";
  ASSERT_EQ(steps.size(), 4u);

  const std::vector<std::string> lines = testing::read_lines(c.metrics_path);
  ASSERT_EQ(lines.size(), 4u);
  for (size_t i = 0; i < lines.size(); ++i) {
    SCOPED_TRACE("line " + std::to_string(i) + ": " + lines[i]);
    const nlohmann::json j = nlohmann::json::parse(lines[i]);  // throws on invalid JSON
    ASSERT_TRUE(j.is_object());
    for (const char* key : {"step", "loss", "step_time_s", "tokens_per_s", "peak_mem_bytes",
                            "comm_bytes", "lr", "grad_norm", "peak_mem_bytes_per_rank"})
      EXPECT_TRUE(j.contains(key)) << key;
    EXPECT_EQ(j["step"].get<int64_t>(), static_cast<int64_t>(i + 1));
    const StepMetrics& m = steps[i];
    EXPECT_EQ(m.step, static_cast<int64_t>(i));
    EXPECT_DOUBLE_EQ(j["loss"].get<double>(), m.loss);
    EXPECT_TRUE(std::isfinite(m.loss));
    EXPECT_GT(j["step_time_s"].get<double>(), 0.0);
    // tokens/s is the global batch over the step time.
    EXPECT_NEAR(j["tokens_per_s"].get<double>() * j["step_time_s"].get<double>(), 4.0 * 16,
                1e-6 * 64);
    EXPECT_GT(j["peak_mem_bytes"].get<uint64_t>(), 0u);
    EXPECT_EQ(j["peak_mem_bytes_per_rank"].size(), 2u);
    // Two data ranks must talk: FSDP gathers parameters and reduces gradients every step.
    EXPECT_GT(j["comm_bytes"].get<uint64_t>(), 0u);
    EXPECT_EQ(j["comm_bytes"].get<uint64_t>(), m.comm_bytes);
    EXPECT_GT(j["grad_norm"].get<double>(), 0.0);
    EXPECT_NEAR(j["lr"].get<double>(), 1e-3, 1e-9);
    // The model's FLOPs of the step over its time; no MFU without a GPU's published peak.
    EXPECT_NEAR(j["model_flops_per_s"].get<double>() * j["step_time_s"].get<double>(),
                c.model->training_flops(4.0 * 16, 16), 1e-6 * c.model->training_flops(64, 16));
    EXPECT_FALSE(j.contains("mfu"));
  }
  // The same communication every step.
  for (size_t i = 1; i < steps.size(); ++i) EXPECT_EQ(steps[i].comm_bytes, steps[0].comm_bytes);
}

TEST(TrainingRun, FirstLossIsNearUniform) {
  // GPT-2's small initialisation gives near-uniform predictions: loss ~ ln(vocab).
  ScratchDir dir;
  TrainConfig c = tiny_config(dir, 1);
  c.steps = 1;
  std::ostringstream out;
  const std::vector<StepMetrics> steps = run_training(c, out, false);
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_NEAR(steps[0].loss, std::log(64.0), 0.3);
  EXPECT_EQ(steps[0].comm_bytes, 0u) << "one rank has nobody to talk to";
}

TEST(TrainingRun, ReportPrintsProgressAndSummary) {
  ScratchDir dir;
  TrainConfig c = tiny_config(dir, 1);
  c.quiet = false;
  std::ostringstream out;
  run_training(c, out, false);
  const std::string text = out.str();
  EXPECT_THAT(text, HasSubstr("step     1/4"));
  EXPECT_THAT(text, HasSubstr("step     4/4"));
  EXPECT_THAT(text, HasSubstr("done: loss"));
  EXPECT_EQ(text.find('\r'), std::string::npos) << "no in-place redraws when not interactive";
}

// --log-every 3 over 10 steps keeps the lines of steps 1, 3, 6, 9 and 10. On a terminal every
// other step redraws one live line in place (a carriage return, then erase to the end of the
// line); elsewhere those steps print nothing and no control character appears.
TEST(TrainingRun, KeepsAProgressLineEveryLogEverySteps) {
  ScratchDir dir;
  TrainConfig c = tiny_config(dir, 1);
  c.quiet = false;
  c.steps = 10;
  c.log_every = 3;
  const std::vector<int> kept = {1, 3, 6, 9, 10};

  std::ostringstream plain;
  run_training(c, plain, /*interactive=*/false);
  EXPECT_EQ(testing::kept_progress_steps(plain.str()), kept);
  EXPECT_EQ(plain.str().find_first_of("\r\033"), std::string::npos) << plain.str();

  std::ostringstream terminal;
  run_training(c, terminal, /*interactive=*/true);
  EXPECT_EQ(testing::kept_progress_steps(terminal.str()), kept);
  for (int live : {2, 4, 5, 7, 8})
    EXPECT_THAT(terminal.str(), HasSubstr("\rstep " + std::string(live < 10 ? "    " : "   ") +
                                          std::to_string(live) + "/10"));
  EXPECT_THAT(terminal.str(), HasSubstr("\033[K"));
}

TEST(TrainingRun, TrainerStepsDirectly) {
  // The Trainer API by hand on two ranks: both see identical metrics (reduced over ranks).
  ScratchDir dir;
  TrainConfig c = tiny_config(dir, 2);
  std::vector<StepMetrics> seen(2);
  spawn_ranks(2, [&](RankContext& ctx) {
    Trainer trainer(c, ctx.world, ctx.memory);
    EXPECT_EQ(trainer.rank(), ctx.rank);
    EXPECT_EQ(trainer.mesh().layout().to_string(), "dp_shard=2");
    ASSERT_NE(dynamic_cast<const FsdpStrategy*>(trainer.plan().find("fsdp")), nullptr);
    trainer.step();
    seen[ctx.rank] = trainer.step();
    EXPECT_EQ(trainer.steps_done(), 2);
  });
  EXPECT_EQ(seen[0].step, 1);
  EXPECT_EQ(seen[0].loss, seen[1].loss);
  EXPECT_EQ(seen[0].comm_bytes, seen[1].comm_bytes);
  EXPECT_EQ(seen[0].peak_mem_per_rank, seen[1].peak_mem_per_rank);
}

// A pipelined step reports its bubble: the time blocked on other stages, part of the exposed
// communication (every wait counts there); a run without a pipeline has none.
TEST(TrainingRun, APipelinedStepReportsItsBubble) {
  ScratchDir dir;
  TrainConfig c = tiny_config(dir, 2);
  c.mesh = parse_mesh_spec("pp=2");
  c.grad_accum = 2;
  std::ostringstream out;
  for (const StepMetrics& m : run_training(c, out, false)) {
    ASSERT_TRUE(m.bubble_s) << "step " << m.step + 1;
    EXPECT_GT(*m.bubble_s, 0.0) << "step " << m.step + 1;
    // The bubble also counts each action's few microseconds of bookkeeping around its wait
    // (taking the input, reaping sends), which no Work::wait does.
    constexpr double kBookkeeping = 100e-6;
    EXPECT_LE(*m.bubble_s, m.exposed_comm_s + kBookkeeping) << "step " << m.step + 1;
  }
  for (const StepMetrics& m : run_training(tiny_config(dir, 2), out, false)) {
    EXPECT_FALSE(m.bubble_s);
  }
}

TEST(TrainingRun, CommBytesCountedWhenFsdpShardsOverBothDataAxes) {
  // FSDP full over dp_replicate=2 x dp_shard=2 shards across all 4 data ranks, exactly as over
  // dp_shard=4: the same collectives on a group of 4, so the same bytes per step.
  ScratchDir dir;
  TrainConfig flat = tiny_config(dir, 4);
  flat.steps = 2;
  std::ostringstream out;
  const std::vector<StepMetrics> expected = run_training(flat, out, false);
  ASSERT_GT(expected.back().comm_bytes, 0u);

  TrainConfig two_axes = flat;
  two_axes.mesh = parse_mesh_spec("dp_replicate=2,dp_shard=2");
  const std::vector<StepMetrics> actual = run_training(two_axes, out, false);
  ASSERT_EQ(actual.size(), 2u);
  EXPECT_EQ(actual.back().comm_bytes, expected.back().comm_bytes)
      << "traffic on the flattened dp communicator must count as strategy traffic";
  EXPECT_NEAR(actual.back().loss, expected.back().loss, 1e-5 * expected.back().loss);
}

TEST(TrainingRun, MissingTokenFileIsAnIoError) {
  ScratchDir dir;
  TrainConfig c = tiny_config(dir, 1);
  c.data_path = dir.file("does_not_exist.bin");
  std::ostringstream out;
  try {
    run_training(c, out, false);
    ADD_FAILURE() << "a missing token file was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("does_not_exist.bin"));
  }
}

// A run that diverges stops on every rank at the first non-finite loss or gradient norm, naming
// the step, before the optimizer step and before anything is written.
TEST(TrainingRun, NonFiniteLossStopsTheRunBeforeAnythingIsWritten) {
  ScratchDir dir;
  TrainConfig c = tiny_config(dir, 2);
  c.lr.lr = 1e30f;  // finite, so accepted, but the first update blows the weights up
  c.save_path = dir.file("model.safetensors");
  std::ostringstream out;
  const std::string message = testing::error_message<Error>([&] { run_training(c, out, false); });
  EXPECT_THAT(message, HasSubstr("step 2: the loss is "));
  EXPECT_THAT(message, HasSubstr("stopping before the optimizer step"));
  EXPECT_FALSE(std::filesystem::exists(c.save_path));
}

// An update that overflows the parameters while the loss and gradients are finite (at lr 3.4e38
// AdamW's first step moves each weight by about lr, and weight decay pushes it past the float
// range) stops that step, before it is checkpointed: the newest checkpoint stays finite.
TEST(TrainingRun, NonFiniteParametersStopTheStepBeforeItsCheckpoint) {
  ScratchDir dir;
  TrainConfig c = tiny_config(dir, 2);
  c.lr.lr = 3.4e38f;
  c.weight_decay = 0.1f;
  c.checkpoint_dir = dir.file("ckpt");
  c.checkpoint_every = 1;
  std::ostringstream out;
  const std::string message = testing::error_message<Error>([&] { run_training(c, out, false); });
  EXPECT_THAT(message, HasSubstr("step 1: the optimizer step made parameters non-finite"));
  EXPECT_THAT(message, HasSubstr("stopping before this step is checkpointed or saved"));
  EXPECT_FALSE(std::filesystem::exists(c.checkpoint_dir + "/step-00000001"));
}

}  // namespace
}  // namespace meshtrain
