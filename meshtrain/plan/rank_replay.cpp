#include "meshtrain/plan/rank_replay.h"

#include <map>
#include <memory>
#include <numeric>
#include <tuple>
#include <utility>

#include "meshtrain/core/error.h"
#include "meshtrain/mesh/axis_names.h"
#include "meshtrain/mesh/device_mesh.h"
#include "meshtrain/models/adamw.h"
#include "meshtrain/models/token_batches.h"
#include "meshtrain/parallel/parallel_plan.h"
#include "meshtrain/plan/model_state.h"
#include "meshtrain/plan/shape_communicator.h"
#include "meshtrain/plugins/pp/schedule_generators.h"

namespace meshtrain {

namespace {

// One rank's step alone, on shape-only tensors and groups, as Trainer builds and steps it.
ReplayedRank replay(const ModelSpec& spec, const PlanLayout& layout, const Workload& workload,
                    int rank) {
  MemoryTracker memory;  // outlives every tensor below
  const MemoryScope counted(&memory);
  ShapeCommunicator world(layout.mesh.size(), rank, "world");
  DeviceMesh mesh(world, layout.mesh);
  const std::unique_ptr<Model> model = spec.build(Device::meta());
  // The run's source of initial values, which shape-only parameters never read.
  const std::unique_ptr<ParameterSource> values = spec.init_values(/*seed=*/0);
  ParallelPlan plan = strategies_of(layout);
  ParallelModel parallel = plan.apply(mesh, *model, values.get());
  parallel.engine->set_activation_checkpointing(layout.ac);
  AdamW optimizer;
  optimizer.prepare_state(parallel.state->optimizer_slots());

  memory.reset_peaks();  // the step's, as Trainer::step counts them
  ReplayedRank out;
  out.replayed = rank;
  out.traffic = mesh.counters_by_group();
  {
    const ops::OpCountScope counting(&out.kernels);
    // The step's micro-batches, views of its batch, freed with it.
    std::vector<MicroBatch> mbs = workload.micro_batches_of(
        TokenBatches::shape_only(workload.batch, workload.seq, mesh.axis_size(mesh_axis::dp),
                                 mesh.axis_rank(mesh_axis::dp))
            .batch(0));
    parallel.runner->forward_backward(mbs, static_cast<double>(workload.batch * workload.seq));
    optimizer.step(parallel.state->optimizer_slots(), /*lr=*/0.f);
    parallel.state->zero_grad();
  }
  const std::vector<std::pair<std::string, CommCounters>> before = std::move(out.traffic);
  out.traffic = mesh.counters_by_group();
  for (size_t i = 0; i < before.size(); ++i) out.traffic[i].second -= before[i].second;
  out.memory = memory.stats(DeviceKind::meta);
  return out;
}

}  // namespace

std::vector<std::pair<std::string, uint64_t>> ReplayedRank::sent() const {
  std::vector<std::pair<std::string, uint64_t>> out;
  for (const auto& [group, counters] : traffic) out.emplace_back(group, counters.total_sent());
  return out;
}

std::vector<std::pair<std::string, uint64_t>> ReplayedRank::calls() const {
  std::vector<std::pair<std::string, uint64_t>> out;
  for (const auto& [group, counters] : traffic)
    out.emplace_back(group,
                     std::accumulate(counters.calls.begin(), counters.calls.end(), uint64_t{0}));
  return out;
}

void check_replayable(const ModelSpec& spec, const PlanLayout& layout, const Workload& workload) {
  workload.check(layout);
  MT_CHECK(spec.max_seq() == 0 || workload.seq <= spec.max_seq(), "workload: sequences of ",
           workload.seq, " tokens exceed the model's context length ", spec.max_seq());
  MT_CHECK(!layout.data_parallel() || !layout.fsdp.offload,
           "the planner replays shape-only device tensors, and offloading keeps real host copies "
           "of the model state: plan without offload (it moves the parameters, gradients and "
           "optimizer state off the device; the rest is as without it)");
  if (layout.pipelined())  // the schedule the runner would generate, or why there is none
    make_schedule(layout.pp.schedule, layout.mesh.axis_size(mesh_axis::pp), workload.micro_batches,
                  layout.pp.virtual_stages);
  const ParallelPlan strategies = strategies_of(layout);
  for (const auto& [plugin, axes] : plugin_axes(layout.mesh))
    strategies.find(plugin)->check_plan(PlannedRun{
        .mesh = layout.mesh,
        .axes = axes,
        .micro_batch_tokens = workload.micro_batch_rows(layout) * workload.seq,
        .micro_batch_tokens_origin = "batch / data-parallel degree / micro-batches x seq"});
}

RankReplays::RankReplays(std::vector<ReplayedRank> each_rank) : replays_(std::move(each_rank)) {
  of_rank_.resize(replays_.size());
  std::iota(of_rank_.begin(), of_rank_.end(), 0);
}

RankReplays::RankReplays(std::vector<ReplayedRank> replays, std::vector<int> of_rank)
    : replays_(std::move(replays)), of_rank_(std::move(of_rank)) {
  for (const int i : of_rank_)
    MT_CHECK(i >= 0 && i < static_cast<int>(replays_.size()), "RankReplays: replay ", i,
             " of ", replays_.size());
}

int RankReplays::distinct_index(int rank) const {
  MT_CHECK(rank >= 0 && rank < size(), "RankReplays: rank ", rank, " of ", size());
  return of_rank_[static_cast<size_t>(rank)];
}

RankReplays replay_ranks(const ModelSpec& spec, const PlanLayout& layout,
                         const Workload& workload) {
  check_replayable(spec, layout, workload);
  // (pp rank, tp rank, optimizer bytes): one replay per class of ranks that hold the same.
  std::map<std::tuple<int, int, uint64_t>, int> by_class;
  std::vector<ReplayedRank> replays;
  std::vector<int> of_rank;
  for (const RankModelState& r : model_state_bytes(spec, layout).ranks) {
    const auto [it, added] = by_class.emplace(std::tuple{r.pp_rank, r.tp_rank, r.bytes.optimizer},
                                              static_cast<int>(replays.size()));
    if (added) replays.push_back(replay(spec, layout, workload, r.rank));
    of_rank.push_back(it->second);
  }
  return RankReplays(std::move(replays), std::move(of_rank));
}

ReplayedRank replay_rank(const ModelSpec& spec, const PlanLayout& layout,
                         const Workload& workload, int rank) {
  MT_CHECK(rank >= 0 && rank < layout.mesh.size(), "replay_rank: rank ", rank, " of the ",
           layout.mesh.size(), " ranks of ", layout.mesh.to_string());
  check_replayable(spec, layout, workload);
  return replay(spec, layout, workload, rank);
}

RankReplays stage_leaders(std::vector<ReplayedRank> leaders, const MeshLayout& mesh) {
  const int stages = mesh.has_axis(mesh_axis::pp) ? mesh.axis_size(mesh_axis::pp) : 1;
  MT_CHECK(static_cast<int>(leaders.size()) == stages, "stage_leaders: ", leaders.size(),
           " replays for the ", stages, " pipeline stages of ", mesh.to_string());
  const int per_stage = mesh.size() / stages;  // pp is the slowest axis
  for (int s = 0; s < stages; ++s)
    MT_CHECK(leaders[s].replayed == s * per_stage, "stage_leaders: the replay of stage ", s,
             " is rank ", leaders[s].replayed, "'s, not its first rank ", s * per_stage, "'s");
  std::vector<int> of_rank;
  for (int r = 0; r < mesh.size(); ++r) of_rank.push_back(r / per_stage);
  return RankReplays(std::move(leaders), std::move(of_rank));
}

}  // namespace meshtrain
