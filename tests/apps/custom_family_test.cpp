// A model family registered outside meshtrain/models (tests/support/mlp_family.h) trains through
// run_training as GPT-2 does: under FSDP x TP it matches its single-rank run, its checkpoints
// record the family and options so that a registry rebuilds the model, a resume continues bit for
// bit, and --save exports its parameters by name.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "meshtrain/checkpoint/checkpoint_reader.h"
#include "meshtrain/models/builtin_models.h"
#include "meshtrain/models/safetensors.h"
#include "meshtrain/train/run_training.h"
#include "meshtrain/train/training_checkpoint.h"
#include "tests/apps/apps_test_support.h"
#include "tests/support/error_message.h"
#include "tests/support/mlp_family.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/training_runs.h"

namespace meshtrain::testing {
namespace {

using ::testing::HasSubstr;

ModelRegistry registry_with_mlp() {
  ModelRegistry models = builtin_models();
  models.add(mlp_family());
  return models;
}

TrainConfig mlp_config(const ScratchDir& dir, const ModelRegistry& models) {
  TrainConfig c;
  c.model = models.preset("mlp-tiny");
  c.data_path = synthetic_token_file(64, 4096);
  c.steps = 6;
  c.batch = 8;
  c.seq = 12;
  c.lr = LrSchedule{.lr = 3e-3f, .warmup_steps = 2, .decay_steps = 6, .min_lr = 3e-4f};
  c.clip = 1.0f;
  c.sample_bytes = 0;
  c.quiet = true;
  c.world = 4;
  c.mesh = parse_mesh_spec("dp_shard=2,tp=2");
  c.checkpoint_dir = dir.file("ckpt");
  c.checkpoint_every = 3;
  c.save_path = dir.file("model.safetensors");
  c.metrics_path = dir.file("metrics.jsonl");
  return c;
}

std::map<std::string, std::vector<float>> read_export(const std::string& path) {
  SafetensorsReader reader(path);
  std::map<std::string, std::vector<float>> out;
  for (const SafetensorsEntry& e : reader.entries()) {
    const Tensor value = Tensor::zeros(e.shape);
    reader.read(e.name, value);
    out[e.name] = value.to_vector();
  }
  return out;
}

TEST(CustomFamily, TrainsCheckpointsResumesAndExportsThroughRunTraining) {
  ScratchDir dir;
  const ModelRegistry models = registry_with_mlp();
  const TrainConfig c = mlp_config(dir, models);
  std::ostringstream out;
  const std::vector<StepMetrics> straight = run_training(c, out, false);
  ASSERT_EQ(straight.size(), 6u);

  // The layout reproduces the single-rank run, and the export holds its parameters by name.
  TrainConfig one = c;
  one.world = 1;
  one.mesh = MeshLayout();
  const RunResult reference = run_reference(one);
  for (size_t s = 0; s < straight.size(); ++s)
    EXPECT_NEAR(straight[s].loss, reference.losses[s], 1e-5 * reference.losses[s]) << s;
  EXPECT_LT(straight.back().loss, straight.front().loss);  // it learns
  EXPECT_EQ(read_lines(c.metrics_path).size(), 6u);
  const auto exported = read_export(c.save_path);
  ASSERT_EQ(exported.size(), reference.params.size());
  for (const auto& [name, want] : reference.params) {
    ASSERT_TRUE(exported.count(name)) << name;
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(exported.at(name)[i], want[i], 1e-5) << name << "[" << i << "]";
  }

  // The checkpoint names the family: a registry that knows it rebuilds the model, one that does
  // not says so.
  const CheckpointReader reader(find_checkpoint(c.checkpoint_dir, "--resume"));
  const ModelSpecPtr recorded = checkpoint_model(reader, models);
  EXPECT_EQ(recorded->family(), "mlp_lm");
  EXPECT_EQ(recorded->options(), c.model->options());
  EXPECT_THAT(error_message<InvalidArgument>([&] { checkpoint_model(reader, builtin_models()); }),
              HasSubstr("unknown model family 'mlp_lm'; known: gpt2"));

  // A resume from step 3 runs steps 4 to 6 as the straight run did, bit for bit.
  TrainConfig resumed = c;
  resumed.resume_dir = c.checkpoint_dir + "/step-00000003";
  resumed.checkpoint_dir = dir.file("ckpt-resumed");
  resumed.save_path = dir.file("resumed.safetensors");
  const std::vector<StepMetrics> rest = run_training(resumed, out, false);
  ASSERT_EQ(rest.size(), 3u);
  for (size_t s = 0; s < rest.size(); ++s) EXPECT_EQ(rest[s].loss, straight[s + 3].loss) << s;
  EXPECT_EQ(read_export(resumed.save_path), exported);
}

// Pipelined (the family's layers split into stages, two micro-batches) and sharded, it matches its
// single-rank run too.
TEST(CustomFamily, PipelinedAndShardedMatchesOneRank) {
  ScratchDir dir;
  TrainConfig c = mlp_config(dir, registry_with_mlp());
  c.steps = 3;
  c.grad_accum = 2;
  c.mesh = parse_mesh_spec("pp=2,dp_shard=2");
  c.checkpoint_dir.clear();
  c.checkpoint_every = 0;
  c.save_path.clear();
  c.metrics_path.clear();
  std::ostringstream out;
  const std::vector<StepMetrics> steps = run_training(c, out, false);
  TrainConfig one = c;
  one.world = 1;
  one.mesh = MeshLayout();
  const RunResult reference = run_reference(one);
  ASSERT_EQ(steps.size(), 3u);
  for (size_t s = 0; s < steps.size(); ++s)
    EXPECT_NEAR(steps[s].loss, reference.losses[s], 1e-5 * reference.losses[s]) << s;
}

// A resume with another family's model is refused naming both.
TEST(CustomFamily, ResumeWithAnotherFamilyIsRefused) {
  ScratchDir dir;
  const ModelRegistry models = registry_with_mlp();
  TrainConfig c = mlp_config(dir, models);
  c.steps = 1;
  c.save_path.clear();
  std::ostringstream out;
  run_training(c, out, false);
  TrainConfig gpt2 = c;
  gpt2.model = models.preset("tiny");
  gpt2.steps = 2;
  gpt2.resume_dir = c.checkpoint_dir;
  gpt2.checkpoint_dir.clear();
  gpt2.checkpoint_every = 0;
  EXPECT_THAT(error_message<InvalidArgument>([&] { run_training(gpt2, out, false); }),
              HasSubstr("the checkpoint's model is mlp_lm's, this run's gpt2's"));
}

// A run that asks for a sample says why it has none: a family without a decoder, or a model that is
// not byte-level.
TEST(CustomFamily, AFamilyWithoutADecoderSaysItSamplesNothing) {
  ScratchDir dir;
  ModelRegistry models = registry_with_mlp();
  TrainConfig c = mlp_config(dir, models);
  c.steps = 1;
  c.world = 1;
  c.mesh = MeshLayout();
  c.checkpoint_dir.clear();
  c.checkpoint_every = 0;
  c.save_path.clear();
  c.sample_bytes = 16;
  c.quiet = false;
  c.model = models.create("mlp_lm", {{"vocab", "256"}, {"dim", "8"}, {"blocks", "1"}});
  c.data_path = synthetic_token_file(256, 4096);
  std::ostringstream out;
  run_training(c, out, false);
  EXPECT_THAT(out.str(), HasSubstr("no sample: the mlp_lm family has no decoder\n"));
  c.model = models.preset("mlp-tiny");
  c.data_path = synthetic_token_file(64, 4096);
  std::ostringstream small;
  run_training(c, small, false);
  EXPECT_THAT(small.str(), HasSubstr("no sample: sampling text needs a byte-level model (vocab "
                                     "256), this one has vocab 64 (--sample 0: none)\n"));
}

}  // namespace
}  // namespace meshtrain::testing
