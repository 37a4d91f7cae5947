#include "meshtrain/plan/step_time.h"

#include <algorithm>
#include <iterator>

#include "meshtrain/core/error.h"
#include "meshtrain/mesh/axis_names.h"
#include "meshtrain/plugins/pp/schedule_generators.h"
#include "meshtrain/plugins/pp/schedule_sim.h"
#include "meshtrain/train/device_peak.h"

namespace meshtrain {

namespace {

// A measured kernel by its fit, any other at its roofline; each call with the host's work
// around it.
double kernel_seconds(const ops::OpCounts::ByOp& by_op, DType dtype,
                      const MachineProfile& machine) {
  double seconds = 0;
  for (const auto& [op, work] : by_op) {
    seconds += machine.host_per_call * static_cast<double>(work.calls);
    const auto fit = machine.kernels.find(op);
    if (fit != machine.kernels.end())
      seconds += fit->second.per_call * static_cast<double>(work.calls) +
                 fit->second.per_unit * kernel_work(work);
    else
      seconds +=
          std::max(work.flops / machine.gemm_flops(dtype), work.bytes / machine.memory_bandwidth);
  }
  return seconds;
}

bool is_data_axis(std::string_view group) {
  return group == mesh_axis::dp || group == mesh_axis::dp_shard || group == mesh_axis::dp_replicate;
}

// A call's latency and a byte's seconds in a collective of kind `op` over `group_size` ranks
// within a node: the kind's measured fit of that size, else of the largest measured below it,
// else of the smallest; the link's figures where the kind was not measured.
KernelFit intra_node_link(const MachineProfile& machine, CommOp op, int group_size) {
  const auto of_kind = machine.collectives.find(op);
  if (of_kind == machine.collectives.end() || of_kind->second.empty())
    return {machine.intra_node_latency, 1 / machine.intra_node_bandwidth};
  const std::map<int, KernelFit>& by_size = of_kind->second;
  auto it = by_size.upper_bound(group_size);
  return it == by_size.begin() ? it->second : std::prev(it)->second;
}

// Whether `rank`'s group on `group` (a mesh axis or dp) lies in one node: a node holds
// consecutive ranks, so the group's lowest and highest ranks tell.
bool within_node(const MeshLayout& mesh, int rank, std::string_view group, int devices_per_node) {
  const auto [lowest, highest] = mesh.group_bounds(rank, mesh.span(group));
  return lowest / devices_per_node == highest / devices_per_node;
}

// Seconds of `rank`'s traffic on each group, as it leaves over the group's link.
std::vector<std::pair<std::string, double>> comm_seconds(const MeshLayout& mesh, int rank,
                                                         const ReplayedRank& replayed,
                                                         const MachineProfile& machine) {
  std::vector<std::pair<std::string, double>> out;
  for (const auto& [group, counters] : replayed.traffic) {
    const bool within = within_node(mesh, rank, group, machine.devices_per_node);
    double seconds = 0;
    for (size_t kind = 0; kind < kNumCommOps; ++kind) {
      if (counters.calls[kind] == 0 && counters.bytes_sent[kind] == 0) continue;
      const KernelFit link =
          within ? intra_node_link(machine, static_cast<CommOp>(kind), mesh.span_size(group))
                 : KernelFit{machine.inter_node_latency, 1 / machine.inter_node_bandwidth};
      seconds += static_cast<double>(counters.bytes_sent[kind]) * link.per_unit +
                 static_cast<double>(counters.calls[kind]) * link.per_call;
    }
    out.emplace_back(group, seconds);
  }
  return out;
}

// A replay's kernels: all of them, and those of the pipeline's computations.
struct KernelTerms {
  double kernels = 0;
  double scheduled = 0;
};

KernelTerms kernel_terms(const ReplayedRank& replayed, DType dtype, const MachineProfile& machine) {
  KernelTerms t;
  // Section by section, as the schedule charges them, so that the kernels outside the schedule
  // are exactly the rest.
  for (const auto& [section, by_op] : replayed.kernels.by_section()) {
    const double seconds = kernel_seconds(by_op, dtype, machine);
    t.kernels += seconds;
    if (!section.empty()) t.scheduled += seconds;
  }
  return t;
}

// The shortest step the ranks of each node can take when they share its CPU cores
// (MachineProfile::cores), by node: their kernels' thread-seconds over the cores they put to use
// (shared_core_efficiency), plus the most communication one of them waits for. Empty where each
// device computes on its own.
std::vector<double> shared_core_bounds(const MeshLayout& mesh, const std::vector<double>& kernels,
                                       const std::vector<double>& exposed_comm,
                                       const MachineProfile& machine) {
  if (machine.cores <= 0) return {};
  const int nodes = (mesh.size() - 1) / machine.devices_per_node + 1;
  std::vector<double> thread_seconds(nodes), comm(nodes);
  for (int r = 0; r < mesh.size(); ++r) {
    const int node = r / machine.devices_per_node;
    thread_seconds[node] += kernels[r] * machine.threads_per_rank;
    comm[node] = std::max(comm[node], exposed_comm[r]);
  }
  std::vector<double> bounds(nodes);
  const double cores = machine.cores * machine.shared_core_efficiency;
  for (int n = 0; n < nodes; ++n) bounds[n] = thread_seconds[n] / cores + comm[n];
  return bounds;
}

// How fast a pipeline's rank computes while its node's cores are shared: each pp rank stands for
// the ranks of its pp coordinate (the pipelines of the other data and tp coordinates run the same
// schedule alongside), and the threads of those computing on a node divide its cores' capacity,
// cores x the share of them ranks put to use (MachineProfile::shared_core_efficiency): a stage
// alone whose threads fill the cores computes at that share too.
ComputeSpeed shared_core_speed(const MeshLayout& mesh, const std::vector<int>& pipeline,
                               const MachineProfile& machine) {
  // ranks[p][s]: the ranks of pp coordinate s on the node of pipeline rank p. pp is the outermost
  // axis, so those of coordinate s are the s-th block of mesh.size() / stages consecutive ranks.
  const int stages = static_cast<int>(pipeline.size());
  const int per_stage = mesh.size() / stages;
  std::vector<std::vector<int>> ranks(stages, std::vector<int>(stages, 0));
  for (int p = 0; p < stages; ++p) {
    const int first = pipeline[p] / machine.devices_per_node * machine.devices_per_node;
    const int last = std::min(mesh.size(), first + machine.devices_per_node);
    for (int s = 0; s < stages; ++s)
      ranks[p][s] =
          std::max(0, std::min(last, (s + 1) * per_stage) - std::max(first, s * per_stage));
  }
  return [ranks = std::move(ranks), &machine](const std::vector<bool>& computing, int p) {
    double threads = 0;
    for (size_t s = 0; s < computing.size(); ++s)
      if (computing[s]) threads += ranks[p][s] * machine.threads_per_rank;
    return std::min(1.0, machine.cores * machine.shared_core_efficiency / threads);
  };
}

// One rank's terms before the pipeline: its kernels, and its communication split into what
// stretches its computations (tp, pp) and what compute may hide (the data axes).
struct RankTerms {
  KernelTerms kernels;
  double serial_comm = 0;  // tp and pp
  RankStepTime time;
};

RankTerms terms_of(const MeshLayout& mesh, int rank, const ReplayedRank& replayed,
                   const KernelTerms& kernels, const MachineProfile& machine) {
  RankTerms t{.kernels = kernels, .serial_comm = 0, .time = {}};
  const std::vector<std::pair<std::string, double>> comm =
      comm_seconds(mesh, rank, replayed, machine);
  double data = 0;
  for (const auto& [group, seconds] : comm) (is_data_axis(group) ? data : t.serial_comm) += seconds;
  const double hidden_share =
      data > 0 ? std::min(1.0, machine.comm_overlap * kernels.kernels / data) : 0.0;
  for (const auto& [group, seconds] : comm)
    t.time.exposed_comm.emplace_back(group,
                                     is_data_axis(group) ? seconds * (1 - hidden_share) : seconds);
  t.time.compute = kernels.kernels;
  return t;
}

}  // namespace

double kernel_work(const ops::OpWork& work) { return work.flops > 0 ? work.flops : work.bytes; }

DType compute_dtype(const PlanLayout& layout) {
  return layout.data_parallel() ? layout.fsdp.param_dtype : DType::f32;
}

double RankStepTime::total_exposed_comm() const {
  double sum = 0;
  for (const auto& [group, seconds] : exposed_comm) sum += seconds;
  return sum;
}

StepTimePrediction predict_step_time(const PlanLayout& layout, const Workload& workload,
                                     const RankReplays& replayed, const MachineProfile& machine) {
  machine.check();
  const MeshLayout& mesh = layout.mesh;
  MT_CHECK(replayed.size() == mesh.size(), "predict_step_time: ", replayed.size(),
           " replayed ranks for the ", mesh.size(), " ranks of ", mesh.to_string());
  const DType dtype = compute_dtype(layout);
  std::vector<KernelTerms> kernels;  // per distinct replay
  for (const ReplayedRank& r : replayed.distinct())
    kernels.push_back(kernel_terms(r, dtype, machine));
  std::vector<RankTerms> terms;
  for (int r = 0; r < mesh.size(); ++r)
    terms.push_back(
        terms_of(mesh, r, replayed[r], kernels[replayed.distinct_index(r)], machine));

  std::vector<double> own(terms.size());  // each rank's step, before waiting for the others
  if (!layout.pipelined()) {
    for (size_t r = 0; r < terms.size(); ++r)
      own[r] = terms[r].kernels.kernels + terms[r].time.total_exposed_comm();
  } else {
    // The pipeline of rank 0's data and tp coordinates: its pp ranks' computations.
    const Schedule schedule = make_schedule(layout.pp.schedule, mesh.axis_size(mesh_axis::pp),
                                            workload.micro_batches, layout.pp.virtual_stages);
    const std::vector<int> pipeline = mesh.group_of(0, {std::string(mesh_axis::pp)});
    std::vector<double> stretch;  // per pp rank: its serial comm spread over its computations
    for (const int r : pipeline)
      stretch.push_back(terms[r].kernels.scheduled > 0
                            ? 1 + terms[r].serial_comm / terms[r].kernels.scheduled
                            : 1);
    const ActionCost cost = [&](const Action& a) {
      const int pp_rank = schedule.rank_of(a.stage);
      const ops::OpCounts& kernels = replayed[pipeline[pp_rank]].kernels;
      const auto section = kernels.by_section().find(to_string(a));
      MT_CHECK(section != kernels.by_section().end(), "the replay of pp rank ", pp_rank,
               " ran no kernels for ", to_string(a));
      return kernel_seconds(section->second, dtype, machine) * stretch[pp_rank];
    };
    const Simulation sim =
        machine.cores > 0 ? simulate(schedule, cost, shared_core_speed(mesh, pipeline, machine))
                          : simulate(schedule, cost);
    for (size_t r = 0; r < terms.size(); ++r) {
      const int pp_rank = mesh.span_coordinate(static_cast<int>(r), mesh_axis::pp);
      double data = 0;
      for (const auto& [group, seconds] : terms[r].time.exposed_comm)
        if (is_data_axis(group)) data += seconds;
      terms[r].time.bubble = sim.idle[pp_rank];
      // What sharing the cores added to its computations' time: a wait for the cores.
      const int simulated = pipeline[pp_rank];  // the rank whose computations the schedule ran
      terms[r].time.cores_wait =
          std::max(0.0, sim.busy[pp_rank] - terms[simulated].kernels.scheduled * stretch[pp_rank]);
      own[r] = sim.makespan + (terms[r].kernels.kernels - terms[r].kernels.scheduled) + data;
    }
  }
  std::vector<double> kernels_of(terms.size()), exposed_of(terms.size());
  for (size_t r = 0; r < terms.size(); ++r) {
    kernels_of[r] = terms[r].kernels.kernels;
    exposed_of[r] = terms[r].time.total_exposed_comm();
  }
  const std::vector<double> bounds = shared_core_bounds(mesh, kernels_of, exposed_of, machine);
  StepTimePrediction out;
  for (size_t r = 0; r < terms.size(); ++r) {
    const int node = static_cast<int>(r) / machine.devices_per_node;
    const double wait = bounds.empty() ? 0.0 : std::max(0.0, bounds[node] - own[r]);
    terms[r].time.cores_wait += wait;
    const double step = own[r] + wait;
    if (r == 0 || step > out.step) {
      out.step = step;
      out.slowest = static_cast<int>(r);
    }
  }
  for (RankTerms& t : terms) out.ranks.push_back(std::move(t.time));
  return out;
}

Throughput predicted_throughput(const ModelSpec& model, const PlanLayout& layout,
                                const Workload& workload, double step_seconds,
                                const MachineProfile& machine) {
  MT_CHECK(step_seconds > 0, "predicted_throughput: a step of ", step_seconds,
           " s; expected more than 0");
  const double tokens = static_cast<double>(workload.batch * workload.seq);
  return {.tokens_per_s = tokens / step_seconds,
          .mfu = model_flop_utilisation(model.training_flops(tokens, workload.seq) / step_seconds,
                                        machine.dense_peak_flops(compute_dtype(layout)),
                                        layout.mesh.size())};
}

}  // namespace meshtrain
