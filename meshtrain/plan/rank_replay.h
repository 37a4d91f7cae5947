// A layout's memory and traffic per rank, predicted by replaying each rank's step alone (the
// planner's memory and traffic model). The rank builds its mesh over a shape-only world
// (ShapeCommunicator: each group is this rank's own, known without the others), its model on
// shape-only tensors (Device::meta), applies the layout's strategies as a run does (FSDP's units
// and shards, TP's narrowed modules, PP's stages and runner), allocates AdamW's moments, and runs
// one step: the runner's forward_backward over the step's micro-batches, then AdamW's update.
// Every layer saves what it saves, activation checkpointing recomputes, FSDP gathers and reduces,
// the pipeline holds what its schedule holds, every collective is counted on its group. The
// rank's memory tracker then counts what a real run's allocators count, by category, and its
// groups what a real run sends on each.
//
// Against the dry run (which equals real runs, tests/plan/dry_run_test.cpp), tested in
// tests/plan/rank_replay_test.cpp: parameters, gradients, optimizer state, full parameters and
// gradients, activations (held and peak) and bytes sent per group are equal to the byte.
// Collectives over shape-only groups complete when issued, so a staging buffer lives only as long
// as the code holds it: without a pipeline that is as long as in a run, and the total peak is
// equal too; under one, a run's sends also wait staged until their receives (a first stage
// running ahead holds several), which the replay's do not, so the staging peak is a lower bound
// and the total peak may miss up to that staging.
//
// Ranks that differ only in their data-parallel coordinates compute the same, and FSDP pads every
// shard to one size; what differs is how many of a shard's elements are real, which AdamW's
// moments and the sums of tied gradients follow. Padding leaves each parameter's real rows
// non-increasing in the shard rank, so two shard ranks with as many optimizer bytes
// (model_state_bytes) hold the same real rows of every parameter: one replay serves each
// (pp rank, tp rank, optimizer bytes) class. Shards that split every parameter evenly make one
// class per (pp, tp) coordinate; uneven ones one more per distinct boundary, at most the shard
// group's size. Nothing is computed: Llama 3 70B on 4096 ranks takes a fraction of a second.
//
// The kernels the step calls are counted too (meshtrain/core/ops/op_counts.h): their FLOPs and
// bytes per op, from the code that runs, recomputation and the pipeline's stages included.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "meshtrain/core/comm/types.h"
#include "meshtrain/core/memory.h"
#include "meshtrain/core/ops/op_counts.h"
#include "meshtrain/models/model_spec.h"
#include "meshtrain/plan/plan_layout.h"

namespace meshtrain {

struct ReplayedRank {
  // The rank whose replay these figures are: this one, or one that stands for it (below).
  int replayed = 0;
  // Over a step after the first (AdamW's moments held): held at its end, and its peaks.
  MemoryStats memory{};
  // The step's traffic on each mesh axis's group and on "dp", in mesh order with "dp" last: bytes
  // sent and calls per op kind (the step-time model costs each kind by its own fit).
  std::vector<std::pair<std::string, CommCounters>> traffic{};
  // The bytes sent on each of those groups, all kinds (as DryRunRank::sent and
  // Trainer::bytes_sent_by_group count them), and the calls.
  std::vector<std::pair<std::string, uint64_t>> sent() const;
  std::vector<std::pair<std::string, uint64_t>> calls() const;
  // The step's kernel calls, FLOPs and bytes, per op (the optimizer's update included).
  ops::OpCounts kernels{};
};

// Every rank's replay, each replay held once for all the ranks it stands for (4096 ranks share
// a few dozen).
class RankReplays {
 public:
  RankReplays() = default;
  // One replay per rank, each its own.
  explicit RankReplays(std::vector<ReplayedRank> each_rank);
  // Rank r's replay is replays[of_rank[r]]. InvalidArgument for an index out of range.
  RankReplays(std::vector<ReplayedRank> replays, std::vector<int> of_rank);

  int size() const { return static_cast<int>(of_rank_.size()); }  // the mesh's ranks
  const ReplayedRank& operator[](int rank) const { return replays_[distinct_index(rank)]; }
  // Each replay once, in the order of the first rank it stands for.
  const std::vector<ReplayedRank>& distinct() const { return replays_; }
  // Which of distinct() stands for `rank`. InvalidArgument for a rank outside the mesh.
  int distinct_index(int rank) const;

 private:
  std::vector<ReplayedRank> replays_;
  std::vector<int> of_rank_;
};

// Every rank of the layout's mesh, by rank. InvalidArgument for a layout the run would refuse, a
// workload the mesh cannot split (Workload::check) or longer than the model's context, a
// schedule that cannot stream the micro-batches, and FSDP offload (whose host copies are real).
RankReplays replay_ranks(const ModelSpec& model, const PlanLayout& layout,
                         const Workload& workload);

// What replay_ranks refuses, refused (InvalidArgument), without replaying anything.
void check_replayable(const ModelSpec& model, const PlanLayout& layout, const Workload& workload);

// One rank's step replayed alone, as replay_ranks replays it (and refusing what it refuses).
ReplayedRank replay_rank(const ModelSpec& model, const PlanLayout& layout,
                         const Workload& workload, int rank);

// The first rank of each pipeline stage (tp rank 0, shard rank 0) standing for the rest of its
// stage, `leaders` in stage order (replay_rank of rank s x mesh.size() / pp): the layout search's
// replays (layout_search.h), a stage's cost whatever the mesh's size. TP gives its first ranks
// the remainder rows (the vocabulary's ceiling-sized slices) and FSDP pads only the last shards,
// so the first rank holds the most of its stage's ranks and computes at least as much: its
// figures are the stage's largest, each rank's own where every split is even. InvalidArgument
// unless there is one leader per stage, each replaying its stage's first rank.
RankReplays stage_leaders(std::vector<ReplayedRank> leaders, const MeshLayout& mesh);

}  // namespace meshtrain
