// The dry run against real runs: on shape-only tensors every rank counts, in its second step,
// exactly the memory a real run's allocators count for parameters, gradients, optimizer state,
// full parameters and gradients and activations (what is held and the step's peaks), and exactly
// the bytes it sends on every group, over FSDP's modes, HSDP, TP with sequence parallelism, every
// pipeline schedule, 3D and activation checkpointing, for GPT-2 and Llama (real runs on the
// host). Collective staging buffers live as long as their ops take, so how many are alive at
// once depends on timing (a pipeline's sends wait staged for their receives, more of them when
// the sender runs ahead): the dry run stages the same buffers, the largest of the same size, and
// the total peaks agree within 5%. At sizes that do not run here, the model state equals the
// planner's prediction.
#include "meshtrain/train/dry_run.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <mutex>
#include <ostream>
#include <sstream>
#include <tuple>

#include "meshtrain/core/error.h"
#include "meshtrain/models/builtin_models.h"
#include "meshtrain/models/llama_family.h"
#include "meshtrain/models/model_registry.h"
#include "meshtrain/plan/model_state.h"
#include "tests/support/error_message.h"
#include "tests/support/layout_cases.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/training_runs.h"

namespace meshtrain::testing {
namespace {

TrainConfig config_of(const ModelSpecPtr& model, const LayoutCase& k) {
  TrainConfig c = uneven_config();
  c.steps = 2;
  c.batch = 16;
  return with_layout(c, model, k);
}

class DryRunMatches : public ::testing::TestWithParam<std::tuple<ModelFamily, LayoutCase>> {};

TEST_P(DryRunMatches, TheRealRunsCounters) {
  const auto& [family, k] = GetParam();
  const TrainConfig c = config_of(family.spec, k);

  std::vector<DryRunRank> real(static_cast<size_t>(c.world));
  std::mutex mutex;
  with_trainers(c, [&](Trainer& trainer, MemoryTracker& memory) {
    trainer.step();
    const auto before = trainer.bytes_sent_by_group();
    trainer.step();
    DryRunRank mine{
        trainer.rank(), memory.stats(DeviceKind::cpu), {}, trainer.bytes_sent_by_group()};
    for (size_t i = 0; i < mine.sent.size(); ++i) mine.sent[i].second -= before[i].second;
    const std::lock_guard lock(mutex);
    real[trainer.rank()] = std::move(mine);
  });

  TrainConfig meta = c;
  meta.device = DeviceKind::meta;
  meta.data_path.clear();  // a dry run reads none
  const DryRun dry = dry_run(meta);
  ASSERT_EQ(dry.ranks.size(), real.size());
  for (size_t r = 0; r < real.size(); ++r) {
    const MemoryStats& want = real[r].memory;
    const MemoryStats& got = dry.ranks[r].memory;
    expect_same_state_and_activations(got, want, r);
    const MemoryCounters& got_comm = got[MemoryCategory::comm];
    const MemoryCounters& want_comm = want[MemoryCategory::comm];
    EXPECT_EQ(got_comm.current, 0u) << "rank " << r;
    EXPECT_EQ(got_comm.peak > 0, want_comm.peak > 0) << "rank " << r;
    EXPECT_EQ(got_comm.largest, want_comm.largest) << "rank " << r << " largest staging buffer";
    EXPECT_NEAR(got.total.peak, want.total.peak, 0.05 * static_cast<double>(want.total.peak))
        << "rank " << r << " total peak";
    // Other memory: the real run's is the dry run's device part (a pipeline's buffers for tied
    // weights) and its host part (the step's figures exchanged between ranks, on the host as in
    // a GPU run) together.
    const uint64_t device_other = got[MemoryCategory::other].peak;
    const uint64_t host_other = dry.ranks[r].host[MemoryCategory::other].peak;
    EXPECT_GE(want[MemoryCategory::other].peak, std::max(device_other, host_other)) << "rank " << r;
    EXPECT_LE(want[MemoryCategory::other].peak, device_other + host_other) << "rank " << r;
    EXPECT_EQ(dry.ranks[r].sent, real[r].sent) << "rank " << r;
    EXPECT_GT(got.total.peak, 0u);
  }
}

const ModelFamily kFamilies[] = {{"gpt2", gpt2_model(uneven_model())},
                                 {"llama", llama_model(uneven_llama(2, /*tied=*/false))}};

const LayoutCase kCases[] = {
    {"fsdp4_full", "dp_shard=4", {}},
    {"fsdp4_grad_op_bf16", "dp_shard=4",
     PluginOptions{{"fsdp", {{"mode", "grad_op"}, {"param_dtype", "bf16"}}}}},
    {"hsdp2x2_accum2", "dp_replicate=2,dp_shard=2", PluginOptions{{"fsdp", {{"mode", "hybrid"}}}},
     2},
    {"ddp2", "dp_shard=2", PluginOptions{{"fsdp", {{"mode", "none"}}}}},
    {"tp2_sp", "tp=2", PluginOptions{{"tp", {{"sequence_parallel", "true"}}}}},
    {"fsdp2_tp2_ac_full", "dp_shard=2,tp=2", {}, 1, AcMode::full},
    {"pp2_1f1b_fsdp2", "pp=2,dp_shard=2", PluginOptions{{"pp", {{"schedule", "1f1b"}}}}, 4},
    {"pp2_interleaved", "pp=2",
     PluginOptions{{"pp", {{"schedule", "interleaved"}, {"virtual", "2"}}}}, 4},
    {"pp2_zb_ac_selective", "pp=2", PluginOptions{{"pp", {{"schedule", "zb-h1"}}}}, 2,
     AcMode::selective},
    {"pp2_fsdp2_tp2_bf16", "pp=2,dp_shard=2,tp=2",
     PluginOptions{{"fsdp", {{"param_dtype", "bf16"}}}}, 2},
};

INSTANTIATE_TEST_SUITE_P(Layouts, DryRunMatches,
                         ::testing::Combine(::testing::ValuesIn(kFamilies),
                                            ::testing::ValuesIn(kCases)),
                         [](const auto& info) {
                           return std::get<0>(info.param).name + "_" + std::get<1>(info.param).name;
                         });

TrainConfig preset_dry_run(const std::string& preset, const std::string& mesh) {
  TrainConfig c;
  c.model = builtin_models().preset(preset);
  c.mesh = parse_mesh_spec(mesh);
  c.world = c.mesh.size();
  c.device = DeviceKind::meta;
  c.batch = 2 * c.mesh.span_size("dp");
  c.seq = std::min<int64_t>(256, c.model->max_seq());
  c.grad_accum = 2;
  c.sample_bytes = 0;
  c.quiet = true;
  return c;
}

// A model that does not train here: its model state is the planner's prediction on every rank.
TEST(DryRun, ModelStateIsThePlannersPrediction) {
  const TrainConfig c = preset_dry_run("llama3.2-1b", "pp=2,dp_shard=4,tp=2");
  const ModelStatePrediction predicted = model_state_bytes(*c.model, plan_layout(c));
  const DryRun dry = dry_run(c);
  ASSERT_EQ(dry.ranks.size(), predicted.ranks.size());
  for (const RankModelState& r : predicted.ranks) {
    const MemoryStats& got = dry.ranks[r.rank].memory;
    EXPECT_EQ(got[MemoryCategory::param].current, r.bytes.parameters) << r.where();
    EXPECT_EQ(got[MemoryCategory::grad].current, r.bytes.gradients) << r.where();
    EXPECT_EQ(got[MemoryCategory::optimizer].current, r.bytes.optimizer) << r.where();
    EXPECT_EQ(got[MemoryCategory::unsharded_param].peak, r.bytes.unsharded_unit_buffers)
        << r.where();
  }
}

TEST(DryRun, PrintsMemoryAndTrafficPerRankGroup) {
  const TrainConfig c = preset_dry_run("llama-tiny", "pp=2,dp_shard=2,tp=2");
  std::ostringstream out;
  print_dry_run(c, dry_run(c), out);
  const std::string text = out.str();
  EXPECT_NE(text.find("on 8 ranks (pp=2,dp_shard=2,tp=2)"), std::string::npos) << text;
  EXPECT_NE(text.find("params      grads  optimizer  full params  full grads  activations"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("pp   dp_shard         tp         dp"), std::string::npos) << text;
  // The two pipeline stages hold different layers (ranks 0-3 and 4-7 in mesh order): each
  // table has a line for the second stage's ranks.
  EXPECT_NE(text.find("\n  4-7 "), std::string::npos) << text;
}

TEST(DryRun, RefusesWhatItCannotDoByTheFlag) {
  const ScratchDir dir;
  const TrainConfig plain = preset_dry_run("llama-tiny", "dp_shard=2");
  const auto refused = [&](const std::function<void(TrainConfig&)>& change,
                           const std::string& message) {
    TrainConfig c = plain;
    change(c);
    expect_error<InvalidArgument>([&] { dry_run(c); }, message);
  };
  refused([&](TrainConfig& c) { c.save_path = dir.file("model.safetensors"); }, "drop --save");
  refused([&](TrainConfig& c) { c.checkpoint_dir = dir.file("no/such/folder"); },
          "drop --checkpoint-dir");
  refused([](TrainConfig& c) { c.val_every = 10; }, "drop --val-every 10");
  refused([](TrainConfig& c) { c.profile = true; }, "drop --profile");
  refused([](TrainConfig& c) { c.backend = BackendKind::mpi; }, "drop --backend mpi");
  refused([](TrainConfig& c) { c.set("fsdp", "offload", "true"); }, "drop --offload");
}

}  // namespace
}  // namespace meshtrain::testing
