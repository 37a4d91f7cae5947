// The planner's memory and traffic per rank, each rank's step replayed alone, against the dry
// run's (which equal real runs' allocator counters and traffic, dry_run_test.cpp): parameters,
// gradients, optimizer state, full parameters and gradients and activations to the byte, held and
// peak, and bytes sent on every group, on every rank; the largest staging buffer equal and the
// staging peak no more than the dry run's; the total peak equal without a pipeline, and off by
// no more than the staged sends with one. Over plain, FSDP, HSDP and DDP steps with
// accumulation, uneven shards, TP with and without sequence parallelism, activation
// checkpointing full and selective, every pipeline schedule (interleaved with an odd micro-batch
// count) and 3D, for GPT-2 and Llama; Llama 3.2 1B in 3D; and Llama 3 70B on 4096 ranks in a
// fraction of a second, one replay per class of equal ranks. And what a run refuses, refused.
#include "meshtrain/plan/rank_replay.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <map>
#include <ostream>
#include <set>
#include <string>
#include <tuple>

#include "meshtrain/core/error.h"
#include "meshtrain/models/builtin_models.h"
#include "meshtrain/models/gpt2_config.h"
#include "meshtrain/models/llama_config.h"
#include "meshtrain/models/llama_family.h"
#include "meshtrain/train/dry_run.h"
#include "tests/support/error_message.h"
#include "tests/support/layout_cases.h"
#include "tests/support/training_runs.h"

namespace meshtrain::testing {
namespace {

// The case on the meta device, as a dry run takes it.
TrainConfig dry_config(const ModelSpecPtr& model, const LayoutCase& k) {
  TrainConfig c = uneven_config();
  c.device = DeviceKind::meta;
  c.data_path.clear();
  c.batch = 24;
  return with_layout(c, model, k);
}

// Every rank's replay against the dry run of `c` (a configuration on the meta device).
void expect_as_dry_run(const TrainConfig& c) {
  const RankReplays predicted = replay_ranks(*c.model, plan_layout(c), plan_workload(c));
  const DryRun dry = dry_run(c);
  ASSERT_EQ(static_cast<size_t>(predicted.size()), dry.ranks.size());
  for (int r = 0; r < predicted.size(); ++r) {
    EXPECT_EQ(predicted[r].sent(), dry.ranks[r].sent) << "rank " << r;
    const MemoryStats& got = predicted[r].memory;
    const MemoryStats& want = dry.ranks[r].memory;
    expect_same_state_and_activations(got, want, r);
    const MemoryCounters& got_comm = got[MemoryCategory::comm];
    const MemoryCounters& want_comm = want[MemoryCategory::comm];
    EXPECT_EQ(got_comm.largest, want_comm.largest) << "rank " << r << " largest staging buffer";
    EXPECT_LE(got_comm.peak, want_comm.peak) << "rank " << r << " staging peak";
    // Every other byte is the dry run's at every moment of the step, so the total peaks differ
    // by the staging alone: none without a pipeline; with one, a run's sends wait staged for
    // their receives, which the replay's do not.
    if (c.mesh.has_axis("pp"))
      EXPECT_NEAR(got.total.peak, want.total.peak, want_comm.peak) << "rank " << r;
    else
      EXPECT_EQ(got.total.peak, want.total.peak) << "rank " << r;
  }
}

class ReplayedRanks : public ::testing::TestWithParam<std::tuple<ModelFamily, LayoutCase>> {};

TEST_P(ReplayedRanks, AreTheDryRuns) {
  const auto& [family, k] = GetParam();
  expect_as_dry_run(dry_config(family.spec, k));
}

const ModelFamily kFamilies[] = {{"gpt2", gpt2_model(uneven_model())},
                                 {"llama", llama_model(uneven_llama(4, /*tied=*/false))}};

const LayoutCase kCases[] = {
    {"single_accum3", "dp_shard=1", {}, 3},
    {"fsdp2_full_bf16", "dp_shard=2", PluginOptions{{"fsdp", {{"param_dtype", "bf16"}}}}},
    {"hsdp2x2_accum2", "dp_replicate=2,dp_shard=2", PluginOptions{{"fsdp", {{"mode", "hybrid"}}}},
     2},
    {"fsdp3_grad_op", "dp_shard=3", PluginOptions{{"fsdp", {{"mode", "grad_op"}}}}},
    {"ddp2", "dp_shard=2", PluginOptions{{"fsdp", {{"mode", "none"}}}}, 2},
    {"tp2", "tp=2", {}},
    {"tp2_sp_ac_selective", "tp=2", PluginOptions{{"tp", {{"sequence_parallel", "true"}}}}, 2,
     AcMode::selective},
    {"fsdp2_tp2_ac_full", "dp_shard=2,tp=2", {}, 1, AcMode::full},
    {"pp2_gpipe", "pp=2", PluginOptions{{"pp", {{"schedule", "gpipe"}}}}, 3},
    {"pp2_1f1b_fsdp2", "pp=2,dp_shard=2", PluginOptions{{"pp", {{"schedule", "1f1b"}}}}, 4},
    {"pp2_interleaved_odd", "pp=2",
     PluginOptions{{"pp", {{"schedule", "interleaved"}, {"virtual", "2"}}}}, 3},
    {"pp2_zb_ac_full", "pp=2", PluginOptions{{"pp", {{"schedule", "zb-h1"}}}}, 4, AcMode::full},
    {"pp4_1f1b", "pp=4", PluginOptions{{"pp", {{"schedule", "1f1b"}}}}, 6},
    {"pp2_fsdp2_tp2_sp_bf16", "pp=2,dp_shard=2,tp=2",
     PluginOptions{{"fsdp", {{"param_dtype", "bf16"}}}, {"tp", {{"sequence_parallel", "true"}}}},
     2},
};

// The step's FLOPs summed over the ranks of `c`'s layout.
double total_flops(const TrainConfig& c, const PlanLayout& layout) {
  double sum = 0.0;
  const RankReplays replays = replay_ranks(*c.model, layout, plan_workload(c));
  for (int r = 0; r < replays.size(); ++r) sum += replays[r].kernels.total().flops;
  return sum;
}

// Every layout splits the same products among its ranks: data parallelism the rows, TP the
// weights' columns or rows and the heads, a pipeline the layers. Summed over the ranks, the
// FLOPs are the single rank's with the same activation checkpointing, and those of no
// checkpointing plus the recomputed forwards with it.
TEST_P(ReplayedRanks, SplitTheSingleRanksFlops) {
  const auto& [family, k] = GetParam();
  const TrainConfig c = dry_config(family.spec, k);
  const PlanLayout layout = plan_layout(c);
  PlanLayout single{.mesh = parse_mesh_spec("dp_shard=1"), .ac = layout.ac};
  EXPECT_DOUBLE_EQ(total_flops(c, layout), total_flops(c, single));
  if (layout.ac.mode == AcMode::none) return;
  single.ac = {};
  EXPECT_GT(total_flops(c, layout), total_flops(c, single));
}

INSTANTIATE_TEST_SUITE_P(Layouts, ReplayedRanks,
                         ::testing::Combine(::testing::ValuesIn(kFamilies),
                                            ::testing::ValuesIn(kCases)),
                         [](const auto& info) {
                           return std::get<0>(info.param).name + "_" + std::get<1>(info.param).name;
                         });

// At a size that does not run here, where a layer's activations dwarf a stage's staged sends.
TEST(ReplayedRanks, OfLlama3_2_1bIn3dAreTheDryRuns) {
  TrainConfig c;
  c.model = builtin_models().preset("llama3.2-1b");
  c.mesh = parse_mesh_spec("pp=2,dp_shard=2,tp=2");
  c.world = c.mesh.size();
  c.device = DeviceKind::meta;
  c.batch = 8;
  c.seq = 1024;
  c.grad_accum = 4;
  c.sample_bytes = 0;
  c.quiet = true;
  c.set("fsdp", "param_dtype", "bf16");
  c.set("tp", "sequence_parallel", "true");
  expect_as_dry_run(c);
}

TEST(ReplayedRanks, OfLlama3_70bOn4096RanksWithinThePlannersBudget) {
  TrainConfig c;
  c.model = builtin_models().preset("llama3-70b");
  c.mesh = parse_mesh_spec("pp=8,dp_shard=64,tp=8");
  c.world = c.mesh.size();
  c.batch = 512;
  c.seq = 4096;
  c.grad_accum = 8;
  c.set("tp", "sequence_parallel", "true");
  c.set("fsdp", "param_dtype", "bf16");
  const auto start = std::chrono::steady_clock::now();
  const RankReplays ranks = replay_ranks(*c.model, plan_layout(c), plan_workload(c));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 10.0);  // what `meshtrain plan` may take in all; 0.3 s here
  ASSERT_EQ(ranks.size(), 4096);
  // One replay per (pp, tp) coordinate, and a second on the first and last stages: a tp rank's
  // 128256 / 8 = 16032 vocabulary rows of the embedding and the head split unevenly over 64
  // shards (251 rows each, the last shard 219).
  EXPECT_EQ(ranks.distinct().size(), 64u + 8 + 8);
  // 1F1B keeps up to 8 micro-batches in flight on the first stage, one on the last.
  EXPECT_GT(ranks[0].memory[MemoryCategory::activation].peak,
            ranks[4095].memory[MemoryCategory::activation].peak);
}

// A single rank's step computes each linear layer's three GEMMs (forward, input gradient, weight
// gradient: 6 FLOPs per weight per token), the head's three, and attention's full T x T products
// (2 forward, 5 backward with the probabilities recomputed: 14 T C per token per layer), as the
// kernels do; the norms, activations, loss and AdamW only move bytes.
TEST(ReplayedRanks, CountTheStepsKernels) {
  const Workload workload{.batch = 4, .seq = 13, .micro_batches = 2};
  const double tokens = 4.0 * 13;
  const PlanLayout single{.mesh = parse_mesh_spec("dp_shard=1")};
  const auto step_flops = [&](const ModelSpec& spec) {
    return replay_ranks(spec, single, workload)[0].kernels.total().flops;
  };
  const GPT2Config g = uneven_model();                         // V=67 d=24 L=2
  const double gpt2_linear = 12.0 * g.layers * g.dim * g.dim;  // c_attn, c_proj, c_fc, mlp c_proj
  EXPECT_DOUBLE_EQ(step_flops(*gpt2_model(g)),
                   tokens * (6.0 * (gpt2_linear + g.vocab * g.dim) + 14.0 * g.layers * 13 * g.dim));
  const LlamaConfig l = uneven_llama(4, /*tied=*/false);  // d=32 ffn=44 8 heads of 4, 4 KV heads
  const double kv = l.kv_heads * l.head_dim();
  const double llama_linear = l.layers * (2.0 * l.dim * l.dim + 2.0 * l.dim * kv +  // q, o; k, v
                                          3.0 * l.dim * l.ffn_dim);  // gate, up, down
  EXPECT_DOUBLE_EQ(step_flops(*llama_model(l)), tokens * (6.0 * (llama_linear + l.vocab * l.dim) +
                                                          14.0 * l.layers * 13 * l.dim));

  const ops::OpCounts kernels = replay_ranks(*gpt2_model(g), single, workload)[0].kernels;
  // Two micro-batches: each block's attention once forward and once backward per micro-batch.
  EXPECT_EQ(kernels.by_op().at("attention_forward").calls, 2 * g.layers);
  EXPECT_EQ(kernels.by_op().at("attention_backward").calls, 2 * g.layers);
  EXPECT_EQ(kernels.by_op().at("layernorm_forward").flops, 0.0);
  EXPECT_GT(kernels.by_op().at("adamw_step").bytes, 0.0);
}

// The replay counts what a real step's kernels compute, rank by rank (a 3D run here).
TEST(ReplayedRanks, CountTheFlopsARealStepComputes) {
  TrainConfig c =
      with_layout(uneven_config(), gpt2_model(uneven_model()),
                  {"pp2_fsdp2_tp2_sp", "pp=2,dp_shard=2,tp=2",
                   PluginOptions{{"tp", {{"sequence_parallel", "true"}}}}, 2, AcMode::full});
  c.batch = 8;
  const RankReplays replayed = replay_ranks(*c.model, plan_layout(c), plan_workload(c));
  std::vector<double> measured(replayed.size());
  with_trainers(c, [&](Trainer& trainer, MemoryTracker&) {
    ops::OpCounts counts;
    const ops::OpCountScope counting(&counts);
    trainer.step();
    measured[trainer.mesh().rank()] = counts.total().flops;
  });
  for (int r = 0; r < replayed.size(); ++r) {
    EXPECT_GT(measured[r], 0.0);
    EXPECT_DOUBLE_EQ(replayed[r].kernels.total().flops, measured[r]) << "rank " << r;
  }
}

// The replay counts each group's traffic by kind as a real step makes it, rank by rank (a 3D run:
// FSDP's gathers and reductions, TP's with sequence parallelism, the pipeline's transfers), the
// per-kind figures the step-time model costs each by its own fit.
TEST(ReplayedRanks, CountEachGroupsTrafficByKindAsARealStep) {
  TrainConfig c = with_layout(uneven_config(), gpt2_model(uneven_model()),
                              {"pp2_fsdp2_tp2_sp", "pp=2,dp_shard=2,tp=2",
                               PluginOptions{{"tp", {{"sequence_parallel", "true"}}}}, 2});
  c.batch = 8;
  const RankReplays replayed = replay_ranks(*c.model, plan_layout(c), plan_workload(c));
  std::vector<std::vector<std::pair<std::string, CommCounters>>> measured(replayed.size());
  with_trainers(c, [&](Trainer& trainer, MemoryTracker&) {
    std::vector<std::pair<std::string, CommCounters>> traffic = trainer.mesh().counters_by_group();
    const std::vector<std::pair<std::string, CommCounters>> before = traffic;
    trainer.step();
    traffic = trainer.mesh().counters_by_group();
    for (size_t g = 0; g < traffic.size(); ++g) traffic[g].second -= before[g].second;
    measured[trainer.mesh().rank()] = traffic;
  });
  for (int r = 0; r < replayed.size(); ++r) {
    ASSERT_EQ(replayed[r].traffic.size(), measured[r].size()) << "rank " << r;
    for (size_t g = 0; g < measured[r].size(); ++g) {
      const auto& [group, counters] = measured[r][g];
      EXPECT_EQ(replayed[r].traffic[g].first, group);
      EXPECT_EQ(replayed[r].traffic[g].second.calls, counters.calls)
          << "rank " << r << " " << group;
      EXPECT_EQ(replayed[r].traffic[g].second.bytes_sent, counters.bytes_sent)
          << "rank " << r << " " << group;
    }
  }
  const CommCounters& pp =
      replayed[0].traffic[0].second;  // stage 0 sends activations, receives grads
  EXPECT_GT(pp.count(CommOp::send), 0u);
  EXPECT_EQ(pp.count(CommOp::send), pp.count(CommOp::recv));
  const CommCounters& tp = replayed[0].traffic[2].second;  // with SP: gathers and scatters
  EXPECT_GT(tp.count(CommOp::all_gather), 0u);
  EXPECT_GT(tp.count(CommOp::reduce_scatter), 0u);
}

// Uneven shards: a class per distinct boundary, each rank's figures its class's replay.
TEST(ReplayedRanks, ReplayOncePerClassOfEqualShards) {
  const TrainConfig c = dry_config(gpt2_model(uneven_model()), {"fsdp3", "dp_shard=3", {}});
  const RankReplays ranks = replay_ranks(*c.model, plan_layout(c), plan_workload(c));
  ASSERT_EQ(ranks.size(), 3);
  EXPECT_EQ(ranks[0].replayed, 0);
  EXPECT_EQ(ranks[2].replayed, 2);  // the last shard holds fewer real rows
  EXPECT_LT(ranks[2].memory[MemoryCategory::optimizer].current,
            ranks[0].memory[MemoryCategory::optimizer].current);
}

TEST(ReplayedRanks, RefuseWhatTheRunWouldRefuse) {
  const ModelSpecPtr gpt2 = gpt2_model(uneven_model());
  const auto refused = [&](const LayoutCase& k, const std::function<void(TrainConfig&)>& change,
                           const std::string& message) {
    TrainConfig c = dry_config(gpt2, k);
    change(c);
    expect_error<InvalidArgument>([&] { replay_ranks(*c.model, plan_layout(c), plan_workload(c)); },
                                  message);
  };
  const LayoutCase fsdp4{"fsdp4", "dp_shard=4", {}};
  refused(
      fsdp4, [](TrainConfig& c) { c.batch = 6; }, "multiple of the 4 data ranks");
  refused(
      fsdp4, [](TrainConfig& c) { c.grad_accum = 4; }, "times the micro-batches");
  refused(
      fsdp4, [](TrainConfig& c) { c.seq = 14; }, "exceed the model's context length 13");
  refused(
      fsdp4, [](TrainConfig& c) { c.set("fsdp", "offload", "true"); }, "without offload");
  refused(
      {"fsdp4_hybrid", "dp_shard=4", PluginOptions{{"fsdp", {{"mode", "hybrid"}}}}},
      [](TrainConfig&) {}, "hybrid needs a mesh with dp_replicate and dp_shard");
  refused(
      {"pp2_interleaved", "pp=2", PluginOptions{{"pp", {{"schedule", "interleaved"}}}}},
      [](TrainConfig& c) { c.grad_accum = 1; }, "interleaved needs at least as many micro-batches");
}

}  // namespace
}  // namespace meshtrain::testing
