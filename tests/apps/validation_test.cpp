// Validation (--val-every, --val-batches, --val-data): the mean loss over the same held-out
// batches, forward only, equal in every layout to the single-rank run's, equal to the trained
// model's loss on those batches, and invisible to training (losses, gradient norms and parameters
// bitwise those of the run without it).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "meshtrain/core/error.h"
#include "meshtrain/models/llama_family.h"
#include "meshtrain/models/token_file.h"
#include "meshtrain/train/run_training.h"
#include "tests/apps/apps_test_support.h"
#include "tests/support/error_message.h"
#include "tests/support/training_runs.h"

namespace meshtrain {
namespace {

using ::testing::HasSubstr;
using testing::ScratchDir;

// Tokens unlike the training data's ramp (another motif), so validation measures generalisation.
std::string validation_file(const ScratchDir& dir, int64_t vocab, int64_t count) {
  std::vector<Token> tokens(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) tokens[i] = static_cast<Token>((i * 11 + i / 7) % vocab);
  const std::string path = dir.file("val.bin");
  write_token_file(path, tokens);
  return path;
}

// uneven_config() validating every 2 of its 4 steps over 2 batches of a file of its own.
TrainConfig validating_config(const std::string& val_path) {
  TrainConfig c = testing::uneven_config();
  c.steps = 4;
  c.val_data_path = val_path;
  c.val_every = 2;
  c.val_batches = 2;
  return c;
}

std::vector<double> val_losses(const std::vector<StepMetrics>& steps) {
  std::vector<double> out;
  for (const StepMetrics& m : steps)
    if (m.val_loss) out.push_back(*m.val_loss);
  return out;
}

std::vector<StepMetrics> run(const TrainConfig& config) {
  std::ostringstream out;
  return run_training(config, out, false);
}

struct Layout {
  const char* name;
  int world;
  const char* mesh;
  const char* fsdp_mode = "";  // empty: the plugin's default
  const char* schedule = "";   // pp's, when the mesh has pp
  int64_t grad_accum = 1;
  bool llama = false;
  const char* param_dtype = "f32";  // the reference's too
  double tolerance = 1e-5;          // relative, against the single-rank run
  const char* fsdp_option = "";     // "KEY=VALUE", another FSDP option
};

void PrintTo(const Layout& l, std::ostream* os) { *os << l.name; }

class ValidationLayouts : public ::testing::TestWithParam<Layout> {
 protected:
  static TrainConfig config(const std::string& val_path, const Layout& l) {
    TrainConfig c = validating_config(val_path);
    if (l.llama) c.model = llama_model(testing::uneven_llama(2, /*tied=*/false));
    c.grad_accum = l.grad_accum;
    if (std::string(l.param_dtype) != "f32") c.set("fsdp", "param_dtype", l.param_dtype);
    return c;
  }
};

// The layout's validation losses equal the single-rank run's (1e-5 relative; bf16 rounds
// differently on each mesh), and its training is bitwise that of the same layout without
// validation: every step's loss and gradient norm, and the saved model.
TEST_P(ValidationLayouts, MatchOneRankAndLeaveTrainingAsItWas) {
  const Layout& l = GetParam();
  ScratchDir dir;
  const std::string val = validation_file(dir, 67, 2000);
  const std::vector<double> want = val_losses(run(config(val, l)));
  ASSERT_EQ(want.size(), 2u);  // after steps 2 and 4

  TrainConfig c = config(val, l);
  c.world = l.world;
  c.mesh = parse_mesh_spec(l.mesh);
  if (*l.fsdp_mode) c.set("fsdp", "mode", l.fsdp_mode);
  if (*l.schedule) c.set("pp", "schedule", l.schedule);
  if (*l.fsdp_option) {
    const std::string option = l.fsdp_option;
    c.set("fsdp", option.substr(0, option.find('=')), option.substr(option.find('=') + 1));
  }
  c.save_path = dir.file("with.safetensors");
  const std::vector<StepMetrics> with = run(c);
  const std::vector<double> got = val_losses(with);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got[i], want[i], l.tolerance * want[i]) << "validation " << i;

  c.val_every = 0;
  c.val_data_path.clear();
  c.save_path = dir.file("without.safetensors");
  const std::vector<StepMetrics> without = run(c);
  EXPECT_TRUE(testing::read_text(dir.file("with.safetensors")) ==
              testing::read_text(dir.file("without.safetensors")))
      << "the saved models differ";
  ASSERT_EQ(without.size(), with.size());
  for (size_t s = 0; s < with.size(); ++s) {
    EXPECT_EQ(with[s].loss, without[s].loss) << "step " << s + 1;
    EXPECT_EQ(with[s].grad_norm, without[s].grad_norm) << "step " << s + 1;
    EXPECT_EQ(with[s].val_loss.has_value(), s % 2 == 1) << "step " << s + 1;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, ValidationLayouts,
    ::testing::Values(Layout{"fsdp_full4", 4, "dp_shard=4", "full"},
                      Layout{"fsdp_grad_op3", 3, "dp_shard=3", "grad_op"},
                      Layout{"hybrid2x2_accum2", 4, "dp_replicate=2,dp_shard=2", "hybrid", "", 2},
                      Layout{"tp2", 2, "tp=2"}, Layout{"replicate2_views", 2, "dp_replicate=2"},
                      Layout{"offload2_grad_op", 2, "dp_shard=2", "grad_op", "", 2, false, "f32",
                             1e-5, "offload=true"},
                      Layout{"bf16_fsdp2_tp2", 4, "dp_shard=2,tp=2", "full", "", 1, false, "bf16",
                             1e-3},
                      Layout{"pp2_1f1b", 2, "pp=2", "", "1f1b", 3},
                      Layout{"pp2_interleaved", 2, "pp=2", "", "interleaved", 4},
                      Layout{"pp2_zb_h1_fsdp2", 4, "pp=2,dp_shard=2", "full", "zb-h1", 2},
                      Layout{"three_d", 8, "pp=2,dp_shard=2,tp=2", "full", "1f1b", 2},
                      Layout{"llama_three_d", 8, "pp=2,dp_shard=2,tp=2", "full", "1f1b", 2, true}),
    [](const ::testing::TestParamInfo<Layout>& info) { return std::string(info.param.name); });

// The reference: the saved model's first-step loss on the validation file (a step's loss is
// computed before its update) is the loss of that model on validation's first batch.
TEST(Validation, IsTheTrainedModelsLossOnTheValidationBatches) {
  ScratchDir dir;
  TrainConfig c = validating_config(validation_file(dir, 67, 2000));
  c.val_batches = 1;
  c.save_path = dir.file("model.safetensors");
  const std::vector<StepMetrics> trained = run(c);
  ASSERT_TRUE(trained.back().val_loss);

  TrainConfig check = testing::uneven_config();
  check.init_path = c.save_path;
  check.data_path = c.val_data_path;
  check.steps = 1;
  EXPECT_NEAR(run(check).front().loss, *trained.back().val_loss, 1e-6 * *trained.back().val_loss);
}

// Without --val-data the last tenth of --data is validation's, and training reads the rest.
TEST(Validation, HoldsOutTheLastTenthOfTheDataWithoutAValidationFile) {
  ScratchDir dir;
  TrainConfig c = testing::uneven_config();
  const std::vector<Token> all = read_token_file(testing::synthetic_token_file(67, 8192)).tokens;
  const auto held_out = all.end() - static_cast<int64_t>(all.size()) / kValHeldOutDivisor;
  c.data_path = dir.file("data.bin");
  write_token_file(c.data_path, all);
  c.steps = 2;
  c.val_every = 2;
  c.val_batches = 1;
  c.save_path = dir.file("model.safetensors");
  c.quiet = false;
  std::ostringstream out;
  const std::vector<StepMetrics> trained = run_training(c, out, false);
  EXPECT_THAT(out.str(), HasSubstr("validation every 2 steps and after the last: the mean loss "
                                   "over 1 batch of 48 x 12 tokens from the last tenth of --data"));

  TrainConfig check = testing::uneven_config();
  check.init_path = c.save_path;
  check.data_path = dir.file("tail.bin");
  write_token_file(check.data_path, std::vector<Token>(held_out, all.end()));
  check.steps = 1;
  EXPECT_NEAR(run(check).front().loss, *trained.back().val_loss, 1e-6 * *trained.back().val_loss);

  // Training read the first nine tenths: its steps are those of a run on them alone.
  TrainConfig head = testing::uneven_config();
  head.data_path = dir.file("head.bin");
  write_token_file(head.data_path, std::vector<Token>(all.begin(), held_out));
  head.steps = 2;
  const std::vector<StepMetrics> on_head = run(head);
  EXPECT_EQ(on_head.back().loss, trained.back().loss);
}

// Holding out validation's tenth changes what training reads: a resume must keep the split.
TEST(Validation, AResumeWithAnotherSplitIsRefused) {
  ScratchDir dir;
  TrainConfig c = testing::uneven_config();
  c.data_path = testing::synthetic_token_file(67, 8192);
  c.steps = 2;
  c.checkpoint_dir = dir.file("ck");
  run(c);
  c.steps = 4;
  c.resume_dir = c.checkpoint_dir;
  c.val_every = 2;
  c.val_batches = 1;
  EXPECT_THAT(testing::error_message<Error>([&] { run(c); }),
              HasSubstr("the data differs: the checkpoint was trained on 8192 tokens"));
  c.checkpoint_dir = c.resume_dir = dir.file("ck2");
  c.steps = 2;
  c.resume_dir.clear();
  run(c);
  c.steps = 4;
  c.resume_dir = c.checkpoint_dir;
  c.val_every = 0;
  EXPECT_THAT(testing::error_message<Error>([&] { run(c); }),
              HasSubstr("the checkpoint was trained on 7373 tokens"));
  EXPECT_THAT(testing::error_message<Error>([&] { run(c); }),
              HasSubstr("the checkpoint's run held out the file's last tenth for validation"));
}

TEST(Validation, AppearsInTheConsoleAndTheMetricsFile) {
  ScratchDir dir;
  TrainConfig c = validating_config(validation_file(dir, 67, 2000));
  c.quiet = false;
  c.log_every = 3;  // validation keeps step 2's line too
  c.metrics_path = dir.file("metrics.jsonl");
  std::ostringstream out;
  const std::vector<StepMetrics> steps = run_training(c, out, false);
  EXPECT_EQ(testing::kept_progress_steps(out.str()), (std::vector<int>{1, 2, 3, 4})) << out.str();
  char val[32];
  std::snprintf(val, sizeof val, "| val %.4f |", *steps[1].val_loss);
  EXPECT_THAT(out.str(), HasSubstr(std::string("step     2/4 | loss ")));
  EXPECT_THAT(out.str(), HasSubstr(val));
  std::vector<nlohmann::json> lines;
  for (const std::string& line : testing::read_lines(c.metrics_path))
    lines.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_FALSE(lines[0].contains("val_loss"));
  EXPECT_EQ(lines[1]["val_loss"].get<double>(), *steps[1].val_loss);
  EXPECT_EQ(lines[3]["val_loss"].get<double>(), *steps[3].val_loss);
}

// A resumed run validates on the same batches: its losses are the uninterrupted run's.
TEST(Validation, AResumedRunValidatesAsTheUninterruptedOne) {
  ScratchDir dir;
  TrainConfig c = validating_config(validation_file(dir, 67, 2000));
  c.world = 2;
  const std::vector<double> straight = val_losses(run(c));
  c.checkpoint_dir = dir.file("ck");
  c.checkpoint_every = 2;
  c.steps = 2;
  run(c);
  c.steps = 4;
  c.resume_dir = c.checkpoint_dir;
  const std::vector<double> resumed = val_losses(run(c));
  ASSERT_EQ(resumed.size(), 1u);
  EXPECT_EQ(resumed.front(), straight.back());
}

// FSDP modes that keep parameters gathered for backward (grad_op, a pipeline) release them at
// the end of a validation pass, which has no backward.
TEST(Validation, LeavesNoFsdpUnitGathered) {
  ScratchDir dir;
  for (const char* mesh : {"dp_shard=2", "pp=2,dp_shard=2"}) {
    TrainConfig c = validating_config(validation_file(dir, 67, 2000));
    c.world = mesh == std::string("dp_shard=2") ? 2 : 4;
    c.mesh = parse_mesh_spec(mesh);
    c.grad_accum = 2;
    c.set("fsdp", "mode", "grad_op");
    testing::with_trainers(c, [&](Trainer& trainer, MemoryTracker& memory) {
      trainer.step();
      trainer.validate();
      EXPECT_EQ(memory.stats(DeviceKind::cpu)[MemoryCategory::unsharded_param].current, 0u)
          << mesh << ", rank " << trainer.rank();
    });
  }
}

TEST(Validation, RefusesWhatCannotWork) {
  ScratchDir dir;
  TrainConfig c = validating_config(validation_file(dir, 67, 1000));  // 2 batches need 1153
  EXPECT_THAT(testing::error_message<Error>([&] { run(c); }),
              HasSubstr("validation reads --val-batches x --batch x --seq + 1 = 1153 tokens, but "
                        "--val-data '" +
                        c.val_data_path +
                        "' holds 1000; use fewer "
                        "--val-batches, or a longer --val-data file"));
  c.val_every = 0;
  EXPECT_THAT(testing::error_message<Error>([&] { c.validate(); }),
              HasSubstr("' is read only with --val-every N"));
  c.val_every = 2;
  c.val_batches = 0;
  EXPECT_THAT(testing::error_message<Error>([&] { c.validate(); }),
              HasSubstr("--val-batches must be positive, got 0"));
  c.val_batches = 1;
  c.metrics_path = c.val_data_path;
  EXPECT_THAT(testing::error_message<Error>([&] { c.validate(); }),
              HasSubstr("is the --val-data file"));
}

}  // namespace
}  // namespace meshtrain
