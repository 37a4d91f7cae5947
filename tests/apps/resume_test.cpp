// Checkpoints of a training run and exact resume: 10 steps straight and 5 steps + checkpoint +
// resume + 5 steps give bit-identical losses and parameters on the same mesh, and agree within
// 1e-6 relative when the resume runs on another mesh (any mesh loads any checkpoint, GPT-2's and
// Llama's, whose key/value heads tp splits); a save interrupted between files leaves the previous
// checkpoint the one that resumes; a resume with a changed model, batch contract or data is
// refused naming the difference.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "meshtrain/train/run_training.h"
#include "meshtrain/core/comm/local/spawn_ranks.h"
#include "meshtrain/models/llama_family.h"
#include "meshtrain/models/token_file.h"
#include "meshtrain/train/training_checkpoint.h"
#include "tests/support/error_message.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/training_runs.h"

namespace meshtrain::testing {
namespace {

using ::testing::HasSubstr;

struct Segment {
  std::vector<double> losses;                        // the steps this segment ran
  std::map<std::string, std::vector<float>> params;  // gathered at its end
};

// Trains `c` (resuming when c.resume_dir is set) until `until` steps are done, then writes a
// checkpoint when `save`.
Segment train_until(const TrainConfig& c, int64_t until, bool save) {
  Segment out;
  with_trainers(c, [&](Trainer& trainer, MemoryTracker&) {
    std::vector<double> losses;
    while (trainer.steps_done() < until) losses.push_back(trainer.step().loss);
    if (save) trainer.save_checkpoint();
    std::map<std::string, std::vector<float>> params;
    trainer.gather_parameters(
        [&](const Parameter& p, const Tensor& v) { params[p.name()] = v.to_vector(); });
    if (trainer.rank() == 0) out = {losses, params};
  });
  return out;
}

TrainConfig on_mesh(TrainConfig c, const std::string& mesh, int world) {
  c.world = world;
  c.mesh = mesh.empty() ? MeshLayout() : parse_mesh_spec(mesh);
  return c;
}

TrainConfig base_config(const ScratchDir& dir) {
  TrainConfig c = uneven_config();
  c.grad_accum = 2;
  c.clip = 0.25f;
  c.checkpoint_dir = dir.file("ckpt");
  return c;
}

// ||got - want|| / ||want|| over the whole model. (Per tensor it can be larger: the key bias of
// attention has a zero gradient in exact arithmetic, so AdamW turns its rounding noise, which
// differs between meshes, into full-size steps.)
double model_relative_error(const std::map<std::string, std::vector<float>>& got,
                            const std::map<std::string, std::vector<float>>& want) {
  double diff = 0.0, norm = 0.0;
  for (const auto& [name, values] : want) {
    const std::vector<float>& mine = got.at(name);
    for (size_t i = 0; i < values.size(); ++i) {
      diff += (static_cast<double>(mine[i]) - values[i]) * (static_cast<double>(mine[i]) - values[i]);
      norm += static_cast<double>(values[i]) * values[i];
    }
  }
  return std::sqrt(diff / norm);
}

TEST(Resume, OnTheSameMeshIsBitwiseIdentical) {
  for (const char* mesh : {"dp_shard=2,tp=2", "pp=2,dp_shard=2"}) {
    ScratchDir dir;
    const TrainConfig c = on_mesh(base_config(dir), mesh, 4);
    const Segment straight = train_until(c, 10, false);
    train_until(c, 5, true);
    TrainConfig resumed = c;
    resumed.resume_dir = c.checkpoint_dir;
    const Segment second = train_until(resumed, 10, false);
    ASSERT_EQ(second.losses.size(), 5u);
    for (size_t s = 0; s < 5; ++s)
      EXPECT_EQ(second.losses[s], straight.losses[5 + s]) << mesh << " step " << 5 + s;
    EXPECT_EQ(second.params, straight.params) << mesh;
  }
}

struct MeshPair {
  const char* from;
  int from_world;
  const char* to;
  int to_world;
  bool llama = false;  // Llama 3 (grouped-query attention) in place of GPT-2
};

class ResumeElsewhere : public ::testing::TestWithParam<MeshPair> {};

TEST_P(ResumeElsewhere, AgreesWithTheStraightRun) {
  const MeshPair pair = GetParam();
  ScratchDir dir;
  TrainConfig c = on_mesh(base_config(dir), pair.from, pair.from_world);
  if (pair.llama) c.model = llama_model(uneven_llama(2, /*tied=*/false));
  const Segment straight = train_until(c, 10, false);
  train_until(c, 5, true);
  TrainConfig resumed = on_mesh(c, pair.to, pair.to_world);
  resumed.resume_dir = c.checkpoint_dir;
  const Segment second = train_until(resumed, 10, false);
  ASSERT_EQ(second.losses.size(), 5u);
  for (size_t s = 0; s < 5; ++s)
    EXPECT_NEAR(second.losses[s], straight.losses[5 + s], 1e-6 * straight.losses[5 + s])
        << "step " << 5 + s;
  ASSERT_EQ(second.params.size(), straight.params.size());
  EXPECT_LE(model_relative_error(second.params, straight.params), 1e-6);
}

INSTANTIATE_TEST_SUITE_P(
    Meshes, ResumeElsewhere,
    ::testing::Values(MeshPair{"dp_shard=4", 4, "dp_shard=2", 2},
                      MeshPair{"dp_shard=3", 3, "dp_shard=4", 4},
                      MeshPair{"dp_shard=2,tp=2", 4, "dp_shard=4", 4},
                      MeshPair{"dp_shard=4", 4, "dp_shard=2,tp=2", 4},
                      MeshPair{"pp=2,dp_shard=2,tp=2", 8, "", 1},
                      MeshPair{"", 1, "pp=2,dp_shard=2,tp=2", 8},
                      MeshPair{"pp=2,dp_shard=2,tp=2", 8, "", 1, /*llama=*/true},
                      MeshPair{"dp_shard=2,tp=2", 4, "tp=4", 4, /*llama=*/true}),
    [](const auto& info) {
      const auto named = [](const char* mesh) { return *mesh ? std::string(mesh) : "single"; };
      std::string name = (info.param.llama ? "llama_" : "") + named(info.param.from) + "_to_" +
                         named(info.param.to);
      for (char& ch : name)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return name;
    });

// The save after step 5 dies between files (every rank after writing its shard): the step-5
// folder is never published, the step-3 checkpoint stays the newest, and resuming from it
// reproduces the straight run bit for bit.
TEST(Resume, AnInterruptedSaveLeavesThePreviousCheckpoint) {
  ScratchDir dir;
  const TrainConfig c = on_mesh(base_config(dir), "dp_shard=2", 2);
  const Segment straight = train_until(c, 10, false);
  struct Killed {};
  EXPECT_THROW(with_trainers(c,
                             [&](Trainer& trainer, MemoryTracker&) {
                               while (trainer.steps_done() < 3) trainer.step();
                               trainer.save_checkpoint();
                               while (trainer.steps_done() < 5) trainer.step();
                               trainer.save_checkpoint([](const std::string&) { throw Killed{}; });
                             }),
               Killed);
  EXPECT_TRUE(std::filesystem::exists(c.checkpoint_dir + "/.step-00000005.partial"));
  EXPECT_FALSE(std::filesystem::exists(c.checkpoint_dir + "/step-00000005"));
  TrainConfig resumed = c;
  resumed.resume_dir = c.checkpoint_dir;
  const Segment second = train_until(resumed, 10, false);
  ASSERT_EQ(second.losses.size(), 7u);
  for (size_t s = 0; s < 7; ++s) EXPECT_EQ(second.losses[s], straight.losses[3 + s]);
  EXPECT_EQ(second.params, straight.params);
}

TEST(Resume, RefusesAChangedModelBatchOrData) {
  ScratchDir dir;
  const TrainConfig c = on_mesh(base_config(dir), "dp_shard=2", 2);
  train_until(c, 2, true);
  const auto refusal = [&](const TrainConfig& changed) {
    TrainConfig r = changed;
    r.resume_dir = c.checkpoint_dir;
    r.world = 1;
    r.mesh = MeshLayout();
    std::string message;
    spawn_ranks(1, [&](RankContext& ctx) {
      message = error_message<InvalidArgument>([&] { Trainer t(r, ctx.world, ctx.memory); });
    });
    return message;
  };
  TrainConfig wider = c;
  GPT2Config wider_model = gpt2_config(*c.model);
  wider_model.dim = 32;
  wider.model = gpt2_model(wider_model);
  EXPECT_THAT(refusal(wider), HasSubstr("the checkpoint's model has dim 24, this run's has dim 32"));
  TrainConfig bigger = c;
  bigger.batch = 24;
  EXPECT_THAT(refusal(bigger), HasSubstr("trained with --batch 48, this run asks for 24"));
  TrainConfig other_data = c;
  other_data.data_path = synthetic_token_file(c.model->vocab(), 5000);
  EXPECT_THAT(refusal(other_data), HasSubstr("the data differs"));
}

// FNV-1a of `values`' little-endian bytes, written out here rather than shared with the library.
template <typename T>
uint64_t fnv1a_of(const std::vector<T>& values) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (const T value : values)
    for (size_t b = 0; b < sizeof(T); ++b)
      hash = (hash ^ ((static_cast<uint64_t>(value) >> (8 * b)) & 0xff)) * 0x100000001b3ull;
  return hash;
}

// Checkpoints record a fingerprint of the data over the tokens' bytes as their file stores them:
// for a gpt-2 file that is still FNV-1a of uint16 tokens, as when tokens were uint16 in memory,
// so its checkpoints written before llama-3 files still resume.
TEST(Resume, TheDataFingerprintHashesTheTokensAtTheirFilesWidth) {
  ScratchDir dir;
  const std::vector<Token> tokens = {0, 1, 255, 256, 50256, 65535, 7};
  write_token_file(dir.file("gpt2.bin"), tokens, TokenFormat::gpt2);
  const DataFingerprint gpt2 = fingerprint_tokens(read_token_file(dir.file("gpt2.bin")));
  EXPECT_EQ(gpt2.tokens, 7);
  EXPECT_EQ(gpt2.hash, fnv1a_of(std::vector<uint16_t>(tokens.begin(), tokens.end())));
  write_token_file(dir.file("llama3.bin"), tokens, TokenFormat::llama3);
  const DataFingerprint llama3 = fingerprint_tokens(read_token_file(dir.file("llama3.bin")));
  EXPECT_EQ(llama3.tokens, 7);
  EXPECT_EQ(llama3.hash, fnv1a_of(tokens));
}

// Through run_training: checkpoints every 2 steps keeping the newest 2, a resume continues the
// step numbering and appends to the metrics file, and a run already at --steps trains nothing.
TEST(Resume, RunTrainingCheckpointsOnScheduleAndContinuesTheMetrics) {
  ScratchDir dir;
  TrainConfig c = on_mesh(base_config(dir), "dp_shard=2", 2);
  c.steps = 4;
  c.checkpoint_every = 2;
  c.keep = 2;
  c.metrics_path = dir.file("metrics.jsonl");
  std::ostringstream out;
  run_training(c, out, false);
  c.steps = 7;
  c.resume_dir = c.checkpoint_dir;
  const std::vector<StepMetrics> resumed = run_training(c, out, false);
  ASSERT_EQ(resumed.size(), 3u);
  EXPECT_EQ(resumed.front().step, 4);
  EXPECT_EQ(entries_of(c.checkpoint_dir),
            (std::vector<std::string>{".lock", "step-00000006", "step-00000007"}));
  std::ifstream metrics(c.metrics_path);
  std::vector<int64_t> numbered;
  for (std::string line; std::getline(metrics, line);)
    numbered.push_back(nlohmann::json::parse(line).at("step").get<int64_t>());
  EXPECT_EQ(numbered, (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7}));  // as the console counts
  EXPECT_TRUE(run_training(c, out, false).empty());
}

}  // namespace
}  // namespace meshtrain::testing
