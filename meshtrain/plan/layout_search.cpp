#include "meshtrain/plan/layout_search.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <future>
#include <iterator>
#include <map>
#include <optional>

#include "meshtrain/core/error.h"
#include "meshtrain/core/memory.h"
#include "meshtrain/core/ops/cpu/cpu_threads.h"
#include "meshtrain/mesh/axis_names.h"
#include "meshtrain/plan/model_state.h"
#include "meshtrain/plan/rank_replay.h"

namespace meshtrain {

namespace {

std::string gib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f GiB", bytes / kGiB);
  return text;
}

std::vector<int> divisors(int n) {
  std::vector<int> out;
  for (int d = 1; d <= n; ++d)
    if (n % d == 0) out.push_back(d);
  return out;
}

// A mesh of the space with the FSDP mode that serves its data axes.
struct MeshChoice {
  MeshLayout mesh;
  FsdpMode mode = FsdpMode::full;
};

int pipeline_ranks(const MeshLayout& mesh) {
  return mesh.has_axis(mesh_axis::pp) ? mesh.axis_size(mesh_axis::pp) : 1;
}

std::vector<MeshChoice> mesh_choices(int world, int devices_per_node, int max_pp) {
  std::vector<MeshChoice> out;
  // tp within a node: dividing its devices, so that no tp group straddles two nodes.
  for (int tp = 1; devices_per_node % tp == 0 && world % tp == 0; tp *= 2) {
    for (const int pp : divisors(world / tp)) {
      if (pp > max_pp) break;
      const int dp = world / (pp * tp);
      const auto mesh_of = [&](int replicate, int shard) {
        std::vector<MeshAxis> axes;
        if (pp > 1) axes.push_back({std::string(mesh_axis::pp), pp});
        if (replicate > 1) axes.push_back({std::string(mesh_axis::dp_replicate), replicate});
        if (shard > 1 || world == 1) axes.push_back({std::string(mesh_axis::dp_shard), shard});
        if (tp > 1) axes.push_back({std::string(mesh_axis::tp), tp});
        return MeshLayout(std::move(axes));
      };
      if (dp == 1) {  // no data axis: FSDP serves none
        out.push_back({mesh_of(1, 1)});
        continue;
      }
      // Under a pipeline, full keeps its blocks gathered from forward to backward as grad_op
      // does (FsdpOptions::reshard_after_forward): the same layout.
      for (const FsdpMode mode : {FsdpMode::full, FsdpMode::grad_op, FsdpMode::none})
        if (pp == 1 || mode != FsdpMode::grad_op) out.push_back({mesh_of(1, dp), mode});
      const int shard = devices_per_node / tp;  // a node's share of the data ranks
      if (shard > 1 && shard < dp && dp % shard == 0)
        out.push_back({mesh_of(dp / shard, shard), FsdpMode::hybrid});
    }
  }
  return out;
}

// The schedules a pipeline of the space runs: 1F1B, interleaved over two stages per rank, ZB-H1.
std::vector<PpOptions> schedules(const MeshLayout& mesh, const PpOptions& base) {
  if (pipeline_ranks(mesh) == 1) return {base};
  std::vector<PpOptions> out;
  for (const auto& [kind, stages] :
       {std::pair{ScheduleKind::one_f_one_b, 1}, std::pair{ScheduleKind::interleaved, 2},
        std::pair{ScheduleKind::zb_h1, 1}}) {
    PpOptions options = base;
    options.schedule = kind;
    options.virtual_stages = stages;
    out.push_back(options);
  }
  return out;
}

// The micro-batch counts of the space that split each data rank's share of the batch.
std::vector<int> micro_batch_counts(const MeshLayout& mesh, int64_t batch) {
  const int64_t dp = mesh.span_size(mesh_axis::dp);
  const int base = pipeline_ranks(mesh);
  std::vector<int> out;
  if (batch % dp != 0) return out;
  for (const int m : {base, 2 * base, 4 * base})
    if ((batch / dp) % m == 0) out.push_back(m);
  return out;
}

// The search's predictions and what it has counted so far.
class Search {
 public:
  Search(const ModelSpec& model, const SearchSpace& space, const MachineProfile& machine)
      : model_(model), space_(space), machine_(machine) {}

  // The mesh's candidates, each schedule and micro-batch count with the weakest checkpointing
  // that fits.
  void evaluate(const MeshChoice& choice) {
    const std::vector<int> counts = micro_batch_counts(choice.mesh, space_.workload.batch);
    if (counts.empty()) {
      out_.refused.push_back(
          detail::concat(choice.mesh.to_string(), ": the global batch of ", space_.workload.batch,
                         " sequences does not split into ", pipeline_ranks(choice.mesh),
                         " or more micro-batches on each of ", choice.mesh.span_size(mesh_axis::dp),
                         " data ranks"));
      return;
    }
    PlanLayout layout = space_.base;
    layout.mesh = choice.mesh;
    layout.fsdp.mode = choice.mode;
    layout.tp.sequence_parallel = layout.tensor_parallel();
    for (const PpOptions& schedule : schedules(choice.mesh, space_.base.pp)) {
      layout.pp = schedule;
      for (const int m : counts) {
        Workload workload = space_.workload;
        workload.micro_batches = m;
        if (!evaluate_checkpointing(layout, workload)) break;
      }
    }
  }

  LayoutSearch result() && { return std::move(out_); }

 private:
  // The weakest checkpointing that fits (none, selective, full), or full's prediction when
  // none does: none first, then full, then selective only if full fits. False when the model
  // state does not fit, which no other micro-batch count changes.
  bool evaluate_checkpointing(const PlanLayout& layout, const Workload& workload) {
    std::optional<PlannedLayout> none = planned(layout, workload, AcMode::none);
    if (!none) return true;
    if (none->fits || !none->replayed) {
      const bool replayed = none->replayed;
      keep(std::move(*none));
      return replayed;
    }
    std::optional<PlannedLayout> full = planned(layout, workload, AcMode::full);
    if (!full) return true;
    if (full->fits) {
      std::optional<PlannedLayout> selective = planned(layout, workload, AcMode::selective);
      if (selective && selective->fits) return keep(std::move(*selective)), true;
    }
    keep(std::move(*full));
    return true;
  }

  void keep(PlannedLayout p) { (p.fits ? out_.fitting : out_.not_fitting).push_back(std::move(p)); }

  // The layout under `ac` predicted; nothing when the run would refuse it (kept as refused).
  std::optional<PlannedLayout> planned(PlanLayout layout, const Workload& workload, AcMode ac) {
    layout.ac = {.mode = ac, .every = space_.base.ac.every};
    PlannedLayout p{.layout = std::move(layout), .workload = workload};
    try {
      predict(p);
    } catch (const InvalidArgument& refused) {  // by the mesh, schedule or micro-batches
      const std::string why = p.layout.to_string() + ": " + refused.what();
      if (std::find(out_.refused.begin(), out_.refused.end(), why) == out_.refused.end())
        out_.refused.push_back(why);
      return std::nullopt;
    }
    return p;
  }

  // Fills in `p`'s prediction, after the run's own checks. Nothing is replayed when the model
  // state alone exceeds the device's memory; the stages are replayed first stage first (it holds
  // the most micro-batches in flight), last stage next (the head's logits), and the first over
  // the memory ends it.
  void predict(PlannedLayout& p) {
    check_replayable(model_, p.layout, p.workload);
    const double capacity = machine_.device_memory;
    const MeshLayout& mesh = p.layout.mesh;
    const int stages = pipeline_ranks(mesh);
    const std::vector<ModelStateBytes>& states = stage_model_states(p.layout);
    for (int s = 0; s < stages; ++s) {
      if (states[s].total() <= p.peak_bytes) continue;
      p.peak_rank = s * (mesh.size() / stages);
      p.peak_bytes = states[s].total();
    }
    if (static_cast<double>(p.peak_bytes) > capacity) {
      p.does_not_fit = detail::concat("model state ", gib(static_cast<double>(p.peak_bytes)),
                                      " (rank ", p.peak_rank, ") over ", gib(capacity));
      return;
    }
    p.peak_bytes = 0;
    p.replayed = true;
    std::vector<int> order{0};
    if (stages > 1) order.push_back(stages - 1);
    for (int s = 1; s + 1 < stages; ++s) order.push_back(s);
    std::vector<ReplayedRank> leaders(static_cast<size_t>(stages));
    for (const int s : order) {
      const int rank = s * (mesh.size() / stages);
      leaders[s] = replay_rank(model_, p.layout, p.workload, rank);
      ++out_.replays;
      // The largest peak, the lowest rank of equals (as `plan --mesh` names it).
      const uint64_t peak = leaders[s].memory.total.peak;
      if (peak > p.peak_bytes || (peak == p.peak_bytes && rank < p.peak_rank)) {
        p.peak_rank = rank;
        p.peak_memory = leaders[s].memory;
        p.peak_bytes = p.peak_memory.total.peak;
      }
      if (static_cast<double>(p.peak_bytes) > capacity) {
        p.does_not_fit = detail::concat("peak ", gib(static_cast<double>(p.peak_bytes)), " (rank ",
                                        p.peak_rank, ") over ", gib(capacity));
        return;
      }
    }
    p.fits = true;
    const RankReplays ranks = stage_leaders(std::move(leaders), mesh);
    const StepTimePrediction time = predict_step_time(p.layout, p.workload, ranks, machine_);
    p.step_seconds = time.step;
    p.slowest_rank = time.slowest;
    p.slowest = time.ranks[time.slowest];
    p.throughput = predicted_throughput(model_, p.layout, p.workload, time.step, machine_);
  }

  // The stage leaders' model state, which of the layouts of one mesh and FSDP mode only their
  // virtual stages change (not the schedule's order, the micro-batches or the checkpointing).
  const std::vector<ModelStateBytes>& stage_model_states(const PlanLayout& layout) {
    auto it = states_by_virtual_stages_.find(layout.pp.virtual_stages);
    if (it == states_by_virtual_stages_.end())
      it = states_by_virtual_stages_
               .emplace(layout.pp.virtual_stages, stage_leader_model_states(model_, layout))
               .first;
    return it->second;
  }

  const ModelSpec& model_;
  const SearchSpace& space_;
  const MachineProfile& machine_;
  std::map<int, std::vector<ModelStateBytes>> states_by_virtual_stages_;
  LayoutSearch out_;
};

}  // namespace

LayoutSearch search_layouts(const ModelSpec& model, const SearchSpace& space,
                            const MachineProfile& machine) {
  MT_CHECK(space.world >= 1, "layout search: a world of at least 1 device, got ", space.world);
  MT_CHECK(space.workload.batch >= 1 && space.workload.seq >= 1,
           "layout search: a global batch and a sequence length of at least 1, got ",
           space.workload.batch, " x ", space.workload.seq);
  MT_CHECK(model.max_seq() == 0 || space.workload.seq <= model.max_seq(),
           "layout search: sequences of ", space.workload.seq,
           " tokens exceed the model's context length ", model.max_seq());
  MT_CHECK(space.max_pp >= 1, "layout search: max_pp of at least 1, got ", space.max_pp);
  machine.check();
  std::vector<MeshChoice> choices =
      mesh_choices(space.world, machine.devices_per_node, space.max_pp);
  // The deepest pipelines first, whose replays stream the most micro-batches, so that no core is
  // left with one at the end.
  std::stable_sort(choices.begin(), choices.end(), [](const auto& a, const auto& b) {
    return pipeline_ranks(a.mesh) > pipeline_ranks(b.mesh);
  });
  // Each mesh on its own, the meshes on every core (a replay touches only its own rank's state,
  // as the local backend's ranks do), merged in the meshes' order.
  std::vector<LayoutSearch> per_mesh(choices.size());
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};  // a worker threw: the others stop at their next mesh
  const auto work = [&] {
    try {
      for (size_t i; !failed && (i = next++) < choices.size();) {
        Search search(model, space, machine);
        search.evaluate(choices[i]);
        per_mesh[i] = std::move(search).result();
      }
    } catch (...) {
      failed = true;
      throw;
    }
  };
  const size_t workers =
      std::min<size_t>(choices.size(), static_cast<size_t>(ops::cpu::available_cpus()));
  std::vector<std::future<void>> running;
  for (size_t w = 0; w < workers; ++w) running.push_back(std::async(std::launch::async, work));
  for (std::future<void>& r : running) r.get();  // rethrows what a worker threw

  LayoutSearch out;
  for (LayoutSearch& found : per_mesh) {
    std::move(found.fitting.begin(), found.fitting.end(), std::back_inserter(out.fitting));
    std::move(found.not_fitting.begin(), found.not_fitting.end(),
              std::back_inserter(out.not_fitting));
    std::move(found.refused.begin(), found.refused.end(), std::back_inserter(out.refused));
    out.replays += found.replays;
  }
  std::stable_sort(out.fitting.begin(), out.fitting.end(), [](const auto& a, const auto& b) {
    if (a.throughput.tokens_per_s != b.throughput.tokens_per_s)
      return a.throughput.tokens_per_s > b.throughput.tokens_per_s;
    return a.peak_bytes < b.peak_bytes;
  });
  std::stable_sort(out.not_fitting.begin(), out.not_fitting.end(),
                   [](const auto& a, const auto& b) { return a.peak_bytes < b.peak_bytes; });
  return out;
}

}  // namespace meshtrain
