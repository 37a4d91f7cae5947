// The layout search (meshtrain plan without --mesh): each layout it ranks predicted as the plan of
// that layout alone predicts it, every mesh, FSDP mode and schedule of its space tried, the
// fastest first, and for the rest why they do not fit or why the run would refuse them.
#include "meshtrain/plan/layout_search.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "meshtrain/core/error.h"
#include "meshtrain/models/llama_family.h"
#include "meshtrain/plan/model_state.h"
#include "meshtrain/plan/rank_replay.h"
#include "tests/support/error_message.h"
#include "tests/support/training_runs.h"

namespace meshtrain::testing {
namespace {

// An H100 node of four devices.
MachineProfile node_of_four() {
  MachineProfile machine = machine_preset("h100-sxm");
  machine.devices_per_node = 4;
  return machine;
}

SearchSpace space_of(int world) { return {.world = world, .workload = {.batch = 16, .seq = 8}}; }

// The largest peak over every rank and the step, from every class's replay (the plan of that
// layout alone).
std::pair<uint64_t, double> planned_alone(const ModelSpec& model, const PlannedLayout& p,
                                          const MachineProfile& machine) {
  const RankReplays ranks = replay_ranks(model, p.layout, p.workload);
  uint64_t peak = 0;
  for (const ReplayedRank& r : ranks.distinct()) peak = std::max(peak, r.memory.total.peak);
  return {peak, predict_step_time(p.layout, p.workload, ranks, machine).step};
}

// The stage leaders stand for their stages: the largest peak is theirs, and the step is the
// whole mesh's. Llama's 4 key/value heads split over tp 4; its shards split unevenly. On nodes of
// two devices the search adds hybrid sharding.
TEST(LayoutSearch, PredictsEachLayoutAsItsOwnPlan) {
  const ModelSpecPtr llama = llama_model(uneven_llama(/*layers=*/4, /*tied=*/false));
  for (const int per_node : {4, 2}) {
    MachineProfile machine = node_of_four();
    machine.devices_per_node = per_node;
    const LayoutSearch found = search_layouts(*llama, space_of(4), machine);
    ASSERT_GE(found.fitting.size(), 20u);
    int hybrid = 0;
    for (const PlannedLayout& p : found.fitting) {
      SCOPED_TRACE(p.layout.to_string() + " m=" + std::to_string(p.workload.micro_batches));
      hybrid += p.layout.fsdp.mode == FsdpMode::hybrid;
      const auto [peak, step] = planned_alone(*llama, p, machine);
      EXPECT_EQ(p.peak_bytes, peak);
      EXPECT_EQ(p.peak_memory.total.peak, peak);
      EXPECT_NEAR(p.step_seconds, step, 1e-9 * step);
      EXPECT_NEAR(p.throughput.tokens_per_s, 16 * 8 / step, 1e-6 * 16 * 8 / step);
    }
    EXPECT_EQ(hybrid > 0, per_node == 2);
  }
}

// Each stage's first rank holds the most model state of its stage, as every rank's prediction
// (model_state_bytes) counts it.
TEST(LayoutSearch, AStagesFirstRankHoldsItsLargestModelState) {
  const ModelSpecPtr llama = llama_model(uneven_llama(/*layers=*/4, /*tied=*/false));
  for (const char* mesh : {"pp=2,dp_shard=3,tp=2", "pp=2,dp_replicate=2,dp_shard=3", "tp=4"}) {
    SCOPED_TRACE(mesh);
    PlanLayout layout{.mesh = parse_mesh_spec(mesh)};
    if (layout.mesh.has_axis("dp_replicate")) layout.fsdp.mode = FsdpMode::hybrid;
    const ModelStatePrediction every = model_state_bytes(*llama, layout);
    const std::vector<ModelStateBytes> leaders = stage_leader_model_states(*llama, layout);
    ASSERT_EQ(leaders.size(), layout.pipelined() ? 2u : 1u);
    for (int s = 0; s < static_cast<int>(leaders.size()); ++s) {
      ModelStateBytes most;
      for (const RankModelState& r : every.ranks)
        if (r.pp_rank == s && r.bytes.total() > most.total()) most = r.bytes;
      EXPECT_EQ(leaders[s], most) << "stage " << s;
    }
  }
}

// One leader per stage, each its stage's first rank; anything else is refused.
TEST(LayoutSearch, StageLeadersAreEachStagesFirstRank) {
  const MeshLayout mesh = parse_mesh_spec("pp=2,dp_shard=2");
  const RankReplays ranks =
      stage_leaders({ReplayedRank{.replayed = 0}, ReplayedRank{.replayed = 2}}, mesh);
  ASSERT_EQ(ranks.size(), 4);
  EXPECT_EQ(ranks[1].replayed, 0);
  EXPECT_EQ(ranks[3].replayed, 2);
  expect_error<InvalidArgument>([&] { stage_leaders({ReplayedRank{}}, mesh); },
                                "1 replays for the 2 pipeline stages");
  expect_error<InvalidArgument>(
      [&] {
        stage_leaders({ReplayedRank{.replayed = 0}, ReplayedRank{.replayed = 3}}, mesh);
      },
      "the replay of stage 1 is rank 3's, not its first rank 2's");
}

// Every mesh of four devices (tp and pp up to 4, the data axes the rest), each FSDP mode, each
// schedule of a pipeline, several micro-batch counts; the fastest first.
TEST(LayoutSearch, CoversTheSpaceFastestFirst) {
  const ModelSpecPtr llama = llama_model(uneven_llama(/*layers=*/4, /*tied=*/false));
  const LayoutSearch found = search_layouts(*llama, space_of(4), node_of_four());
  std::set<std::string> meshes, modes, schedules;
  std::set<int> micro_batches;
  for (const PlannedLayout& p : found.fitting) {
    meshes.insert(p.layout.mesh.to_string());
    if (p.layout.data_parallel()) modes.insert(std::string(fsdp_mode_name(p.layout.fsdp.mode)));
    if (p.layout.pipelined())
      schedules.insert(std::string(schedule_kind_name(p.layout.pp.schedule)));
    micro_batches.insert(p.workload.micro_batches);
    EXPECT_EQ(p.layout.tp.sequence_parallel, p.layout.tensor_parallel());
    EXPECT_EQ(p.layout.ac.mode, AcMode::none) << "everything fits an H100 without recomputing";
  }
  EXPECT_EQ(meshes, (std::set<std::string>{"dp_shard=4", "dp_shard=2,tp=2", "tp=4",
                                           "pp=2,dp_shard=2", "pp=2,tp=2", "pp=4"}));
  EXPECT_EQ(modes, (std::set<std::string>{"full", "grad_op", "none"}));
  EXPECT_EQ(schedules, (std::set<std::string>{"1f1b", "interleaved", "zb-h1"}));
  EXPECT_EQ(micro_batches, (std::set<int>{1, 2, 4, 8, 16}));
  EXPECT_TRUE(
      std::is_sorted(found.fitting.begin(), found.fitting.end(), [](const auto& a, const auto& b) {
        return a.throughput.tokens_per_s > b.throughput.tokens_per_s;
      }));
  int stages = 0;  // every stage of each layout that fits was replayed, at least
  for (const PlannedLayout& p : found.fitting)
    stages += p.layout.pipelined() ? p.layout.mesh.axis_size("pp") : 1;
  EXPECT_GE(found.replays, stages);
  EXPECT_TRUE(found.not_fitting.empty());
  // Four stages of interleaved need 8 layers: refused, with the pipeline's reason.
  ASSERT_FALSE(found.refused.empty());
  EXPECT_NE(found.refused.front().find("needs at least as many layers"), std::string::npos)
      << found.refused.front();

  // Hybrid sharding within nodes of two devices, replicated across.
  MachineProfile pairs = node_of_four();
  pairs.devices_per_node = 2;
  const LayoutSearch hybrid = search_layouts(*llama, space_of(4), pairs);
  EXPECT_TRUE(std::any_of(hybrid.fitting.begin(), hybrid.fitting.end(), [](const auto& p) {
    return p.layout.fsdp.mode == FsdpMode::hybrid &&
           p.layout.mesh.to_string() == "dp_replicate=2,dp_shard=2";
  }));
}

// On a device too small for a whole batch's activations, checkpointing; on one too small for
// the model state, nothing replayed, and each layout says why.
TEST(LayoutSearch, CheckpointsWhereNeededAndSaysWhyTheRestDoNotFit) {
  const ModelSpecPtr llama = llama_model(uneven_llama(/*layers=*/4, /*tied=*/false));
  MachineProfile machine = node_of_four();
  const LayoutSearch roomy = search_layouts(*llama, space_of(1), machine);
  ASSERT_FALSE(roomy.fitting.empty());
  const PlannedLayout& single = roomy.fitting.front();
  ASSERT_EQ(single.layout.ac.mode, AcMode::none);

  // Room for selective checkpointing's peak at one micro-batch: full fits too, and selective,
  // the lighter, is chosen.
  PlanLayout selective = single.layout;
  selective.ac.mode = AcMode::selective;
  const RankReplays checkpointed = replay_ranks(*llama, selective, single.workload);
  machine.device_memory = static_cast<double>(checkpointed[0].memory.total.peak);
  const LayoutSearch tight = search_layouts(*llama, space_of(1), machine);
  int whole_batch = 0;  // layouts of one micro-batch: they fit only checkpointed
  for (const PlannedLayout& p : tight.fitting) {
    EXPECT_LE(static_cast<double>(p.peak_bytes), machine.device_memory) << p.layout.to_string();
    if (p.workload.micro_batches > 1) continue;  // smaller micro-batches may fit without
    ++whole_batch;
    EXPECT_EQ(p.layout.ac.mode, AcMode::selective) << p.layout.to_string();
  }
  EXPECT_EQ(whole_batch, 1);
  for (const PlannedLayout& p : tight.not_fitting) {
    EXPECT_GT(static_cast<double>(p.peak_bytes), machine.device_memory);
    EXPECT_NE(p.does_not_fit.find(" over "), std::string::npos) << p.does_not_fit;
  }

  machine.device_memory = 1024;
  const LayoutSearch none = search_layouts(*llama, space_of(4), machine);
  EXPECT_TRUE(none.fitting.empty());
  ASSERT_FALSE(none.not_fitting.empty());
  EXPECT_EQ(none.replays, 0) << "the model state alone does not fit: nothing to replay";
  for (const PlannedLayout& p : none.not_fitting) {
    EXPECT_FALSE(p.replayed);
    EXPECT_EQ(p.does_not_fit.rfind("model state ", 0), 0u) << p.does_not_fit;
  }
  EXPECT_TRUE(
      std::is_sorted(none.not_fitting.begin(), none.not_fitting.end(),
                     [](const auto& a, const auto& b) { return a.peak_bytes < b.peak_bytes; }));
}

TEST(LayoutSearch, RefusesAnEmptySpace) {
  const ModelSpecPtr llama = llama_model(uneven_llama(/*layers=*/4, /*tied=*/false));
  expect_error<InvalidArgument>(
      [&] {
        search_layouts(*llama, {.world = 0, .workload = {.batch = 8, .seq = 8}}, node_of_four());
      },
      "a world of at least 1 device");
  expect_error<InvalidArgument>(
      [&] {
        search_layouts(*llama, {.world = 4, .workload = {.batch = 0, .seq = 8}}, node_of_four());
      },
      "a global batch and a sequence length of at least 1");
  expect_error<InvalidArgument>(
      [&] {
        search_layouts(*llama, {.world = 4, .workload = {.batch = 8, .seq = 8}, .max_pp = 0},
                       node_of_four());
      },
      "max_pp of at least 1");
  expect_error<InvalidArgument>(
      [&] {
        search_layouts(*llama, {.world = 4, .workload = {.batch = 8, .seq = 64}}, node_of_four());
      },
      "sequences of 64 tokens exceed the model's context length 13");
}

}  // namespace
}  // namespace meshtrain::testing
