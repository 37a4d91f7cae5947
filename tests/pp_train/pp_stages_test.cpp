// How a model splits into pipeline stages, the pp plugin's options, and the errors for layouts it
// cannot run.
#include <map>
#include <mutex>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "meshtrain/core/comm/local/spawn_ranks.h"
#include "meshtrain/plugins/builtin_strategies.h"
#include "meshtrain/plugins/fsdp/fsdp_strategy.h"
#include "meshtrain/plugins/pp/pp_strategy.h"
#include "meshtrain/plugins/pp/stage_model.h"
#include "tests/support/error_message.h"
#include "tests/support/training_runs.h"

namespace meshtrain::testing {
namespace {

using ::testing::HasSubstr;

std::vector<std::pair<int, int>> spans(const std::vector<LayerSpan>& s) {
  std::vector<std::pair<int, int>> out;
  for (const LayerSpan& span : s) out.push_back({span.first, span.last});
  return out;
}

TEST(PpStages, BalancedByLayerCountOrAsGiven) {
  // GPT-2 with 6 blocks: 8 layers, the embedding first and the head last.
  EXPECT_EQ(spans(partition_layers(8, 2)), (std::vector<std::pair<int, int>>{{0, 3}, {4, 7}}));
  EXPECT_EQ(spans(partition_layers(8, 3)),
            (std::vector<std::pair<int, int>>{{0, 1}, {2, 4}, {5, 7}}));
  EXPECT_EQ(spans(partition_layers(8, 4, {3, 2, 2, 1})),
            (std::vector<std::pair<int, int>>{{0, 2}, {3, 4}, {5, 6}, {7, 7}}));
  EXPECT_EQ(parse_layer_counts("3,2,2,1"), (std::vector<int>{3, 2, 2, 1}));
}

TEST(PpStages, LayerCountsMustBeACompleteList) {
  for (const char* text : {"", "1,3,", ",1,3", "2,,2"})
    EXPECT_THAT(error_message<InvalidArgument>([&] { parse_layer_counts(text); }),
                HasSubstr("--pp-layers expects comma-separated layer counts"))
        << "'" << text << "'";
}

TEST(PpStages, ClearErrors) {
  EXPECT_THAT(error_message<InvalidArgument>([] { partition_layers(3, 4); }),
              HasSubstr("a pipeline of 4 stages needs at least as many layers; the model has 3"));
  EXPECT_THAT(error_message<InvalidArgument>([] { partition_layers(8, 2, {3, 3}); }),
              HasSubstr("--pp-layers must add up to the model's layers"));
  EXPECT_THAT(error_message<InvalidArgument>([] { partition_layers(8, 2, {8, 0}); }),
              HasSubstr("every stage needs at least one layer"));
  EXPECT_THAT(error_message<InvalidArgument>([] { partition_layers(8, 3, {4, 4}); }),
              HasSubstr("a layer count per stage (3 stages = pp x virtual stages)"));
  EXPECT_THAT(error_message<InvalidArgument>([] { parse_layer_counts("3,x"); }),
              HasSubstr("--pp-layers expects comma-separated layer counts such as 3,2,2,3, got 'x'"));
  const StrategyRegistry registry = builtin_strategies();
  EXPECT_THAT(error_message<InvalidArgument>([&] { registry.create("pp", {{"schedule", "2f2b"}}); }),
              HasSubstr("pp option schedule (--pp-schedule) expects one of gpipe, 1f1b, "
                        "interleaved or zb-h1, got '2f2b'"));
  EXPECT_THAT(error_message<InvalidArgument>([&] { registry.create("pp", {{"chunks", "2"}}); }),
              HasSubstr("unknown pp option 'chunks'; known: schedule, virtual, layers"));
}

TEST(PpStages, InterleavedDefaultsToTwoStagesPerRank) {
  const StrategyRegistry registry = builtin_strategies();
  const auto virtual_stages = [&](const TextOptions& options) {
    const std::unique_ptr<Strategy> pp = registry.create("pp", options);
    return dynamic_cast<const PpStrategy&>(*pp).options().virtual_stages;
  };
  EXPECT_EQ(virtual_stages({{"schedule", "interleaved"}}), 2);
  EXPECT_EQ(virtual_stages({{"schedule", "interleaved"}, {"virtual", "3"}}), 3);
  EXPECT_EQ(virtual_stages({{"schedule", "1f1b"}}), 1);
}

// Explicit stage sizes and FSDP told to reshard after forward under PP train like any layout.
TEST(PpStages, ExplicitLayersAndReshardAfterForwardMatchTheSingleRankRun) {
  TrainConfig c = uneven_config();  // 2 blocks: 4 layers
  c.world = 4;
  c.mesh = parse_mesh_spec("pp=2,dp_shard=2");
  c.grad_accum = 2;
  c.set("pp", "layers", "3,1").set("fsdp", "reshard_after_forward", "true");
  expect_same_run(run_on_mesh(c), uneven_reference(0.f));
}

// One micro-batch for two stages (grad_accum 1, the pipeline never fills), as the 3D layout of
// tests/gpu_training runs it on one GPU: the host proves the algorithm, so a failure there is
// the device's.
TEST(PpStages, OneMicroBatchThroughTwoStagesMatchesTheSingleRankRun) {
  TrainConfig c = uneven_config();
  c.world = 8;
  c.mesh = parse_mesh_spec("pp=2,dp_shard=2,tp=2");
  c.set("fsdp", "mode", "full");
  ASSERT_EQ(c.grad_accum, 1);
  expect_same_run(run_on_mesh(c), uneven_reference(0.f));
}

// A zero-bubble schedule splits backward, and a W can run after the next micro-batch's I: it still
// adds into the bf16 gradients that FSDP sums in f32 between micro-batches. In bf16 it trains as
// 1F1B does, to bf16 rounding (a lost micro-batch would move the gradient norm by a third).
TEST(PpStages, ZeroBubbleInBf16TrainsAsOneFOneB) {
  TrainConfig c = uneven_config();
  c.world = 4;
  c.mesh = parse_mesh_spec("pp=2,dp_shard=2");
  c.grad_accum = 3;
  c.steps = 3;
  c.set("fsdp", "param_dtype", "bf16");
  const RunResult one_f_one_b = run_on_mesh(c.set("pp", "schedule", "1f1b"));
  const RunResult zero_bubble = run_on_mesh(c.set("pp", "schedule", "zb-h1"));
  expect_same_run(zero_bubble, one_f_one_b, 2e-3);
}

// GPT-2's wte lives on the first stage (embedding) and the last (tied head): after training, the
// two copies are still equal bit for bit, under FSDP and TP too.
TEST(PpStages, TiedEmbeddingCopiesStayEqual) {
  TrainConfig c = uneven_config();
  c.world = 8;
  c.mesh = parse_mesh_spec("pp=2,dp_shard=2,tp=2");
  c.grad_accum = 2;
  c.set("pp", "schedule", "zb-h1").set("fsdp", "mode", "full");
  std::map<int, std::vector<float>> wte_by_rank;
  std::mutex mutex;
  with_trainers(c, [&](Trainer& trainer, MemoryTracker&) {
    for (int s = 0; s < 3; ++s) trainer.step();
    std::vector<float> wte;
    for (const OptimizerSlot& slot : trainer.state().held_slots())
      if (slot.name == "wte.weight") wte = slot.param.to_vector();
    std::lock_guard lock(mutex);
    wte_by_rank[trainer.rank()] = wte;  // each rank's shard of its copy
  });
  ASSERT_EQ(wte_by_rank.size(), 8u);
  for (int rank = 0; rank < 4; ++rank) {  // pp rank 0 and the same dp and tp coordinates on pp 1
    ASSERT_FALSE(wte_by_rank[rank].empty());
    EXPECT_EQ(wte_by_rank[rank], wte_by_rank[rank + 4]) << "rank " << rank;
  }
}

// With reshard-after-forward under a pipeline, every unit reshards after forward but the root
// (embeddings, final LayerNorm, tied head), on the stages that hold it: the first and the last;
// the middle one holds only a block.
TEST(PpStages, ReshardAfterForwardSparesOnlyTheRoot) {
  TrainConfig c = uneven_config();  // 4 layers: the embedding, 2 blocks, the head
  c.world = 6;
  c.mesh = parse_mesh_spec("pp=3,dp_shard=2");
  c.grad_accum = 3;
  c.set("fsdp", "reshard_after_forward", "true");
  std::map<int, std::map<std::string, bool>> reshards_by_stage;
  std::mutex mutex;
  with_trainers(c, [&](Trainer& trainer, MemoryTracker&) {
    std::map<std::string, bool> reshards;
    const auto* fsdp = dynamic_cast<const FsdpStrategy*>(trainer.plan().find("fsdp"));
    for (const auto& unit : fsdp->runtime().units())
      reshards[unit->name()] = unit->reshard_after_forward();
    std::lock_guard lock(mutex);
    reshards_by_stage[trainer.mesh().axis_rank("pp")] = reshards;
  });
  using Reshards = std::map<std::string, bool>;
  EXPECT_EQ(reshards_by_stage[0], (Reshards{{"root", false}}));
  EXPECT_EQ(reshards_by_stage[1], (Reshards{{"h.0", true}}));
  EXPECT_EQ(reshards_by_stage[2], (Reshards{{"h.1", true}, {"root", false}}));
}

TEST(PpStages, TooFewLayersForThePipelineFailsBeforeTraining) {
  TrainConfig c = uneven_config();  // 4 layers
  c.world = 4;
  c.mesh = parse_mesh_spec("pp=4");
  c.set("pp", "schedule", "interleaved").set("pp", "virtual", "2");
  std::vector<std::string> errors(4);
  spawn_ranks(4, [&](RankContext& ctx) {
    errors[ctx.rank] =
        error_message<InvalidArgument>([&] { Trainer trainer(c, ctx.world, ctx.memory); });
  });
  EXPECT_THAT(errors[0], HasSubstr("a pipeline of 8 stages needs at least as many layers"));
}

// A pipeline reduces each unit's gradients on its last backward of the step: asking FSDP for
// every micro-batch cannot be honoured and is refused, not silently changed.
TEST(PpStages, FsdpGradSyncEveryIsRefusedUnderAPipeline) {
  TrainConfig c = uneven_config();
  c.world = 4;
  c.mesh = parse_mesh_spec("pp=2,dp_shard=2");
  c.grad_accum = 2;
  c.set("fsdp", "grad_sync", "every");
  std::vector<std::string> errors(4);
  spawn_ranks(4, [&](RankContext& ctx) {
    errors[ctx.rank] =
        error_message<InvalidArgument>([&] { Trainer trainer(c, ctx.world, ctx.memory); });
  });
  EXPECT_THAT(errors[0], HasSubstr("fsdp grad_sync every cannot be honoured under pipeline"));
  c.set("fsdp", "grad_sync", "last");
  with_trainers(c, [](Trainer& trainer, MemoryTracker&) { trainer.step(); });
}

}  // namespace
}  // namespace meshtrain::testing
