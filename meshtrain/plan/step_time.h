// The planner's step-time model: each rank's step from what its replay counted (rank_replay.h:
// the kernels it calls, per pipeline computation; the bytes and calls on each group) and a
// machine profile (machine_profile.h). Its terms:
//
//   kernels   each op's work at the machine's rate: max(FLOPs / GEMM rate of the compute dtype,
//             bytes / memory bandwidth), a roofline per op (the compute dtype is FSDP's
//             param_dtype, f32 without a data axis); or, for an op a calibrated profile measured,
//             its fit: per_call x calls + per_unit x work (kernel_work); each call with the
//             host's work around it (MachineProfile::host_per_call). Ranks sharing a
//             node's CPU cores (MachineProfile::cores) share them: see "cores" below.
//   comm      per group and kind of call (all-gather, reduce-scatter, all-reduce, send,
//             recv, ...): bytes sent / the link's bandwidth + calls x its latency (a transfer's
//             send and its receive each a call, on both ranks). A group whose
//             ranks share a node (ranks are numbered tp fastest, devices_per_node to a node)
//             uses the intra-node link (a calibrated profile: the fit of the kind and the group's
//             size), any other the inter-node one.
//   exposed   tp and pp: all of it (TP's collectives sit between a layer's GEMMs; a stage's
//             transfers are counted as if serial). The data axes' (FSDP's gathers and
//             reductions): what the rank's compute cannot hide, max(0, comm - overlap x
//             compute), prefetch and asynchronous reductions overlapping the rest where the
//             machine runs collectives beside the kernels (MachineProfile::comm_overlap).
//   pipeline  the schedule simulated (schedule_sim.h) with each computation's own cost: its
//             kernels (the replay counts each as a section "1F3") stretched by the rank's
//             exposed tp and pp share, for the pipeline of rank 0's data and tp coordinates
//             (the largest shards). The bubble of a rank is the makespan less its busy time.
//             Where the node's ranks share CPU cores, the schedule runs with them shared as it
//             goes (see "cores"): while a stage computes alone its ranks have the cores to
//             themselves, while several compute they divide them.
//   step      without a pipeline: kernels + exposed comm; with one: the makespan + the kernels
//             outside the schedule (AdamW) + the exposed data-axis comm. The slowest rank's step
//             is every rank's (they meet in the step's collectives).
//   cores     where a node's ranks share its CPU cores (MachineProfile::cores > 0), no step of
//             theirs is shorter than their kernels' thread-seconds over the cores they put to
//             use (MachineProfile::shared_core_efficiency) plus the most exposed communication
//             one of them has; a rank waits for the cores the difference. A pipeline's ranks
//             share the cores as its schedule runs: the threads computing at each moment divide
//             the cores' capacity (cores x the share they put to use), so idle ranks lend
//             theirs to the busy ones, and a rank's computations stretched so wait for the cores.
//
// Assumptions: a preset's kernels reach its rates at every shape (a calibrated profile fits each
// op over a few shapes instead, in f32: calibrate.h); collectives reach the link's bandwidth at
// every size, one fit for every collective (per kind and group size in a calibrated profile);
// ranks sharing cores share them fairly, without the scheduler's tail at each meeting
// (docs/planner.md).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "meshtrain/models/model_spec.h"
#include "meshtrain/plan/machine_profile.h"
#include "meshtrain/plan/plan_layout.h"
#include "meshtrain/plan/rank_replay.h"

namespace meshtrain {

struct RankStepTime {
  double compute = 0;  // seconds of this rank's kernels
  // Seconds of communication the step waits for, per group (ReplayedRank::sent's groups).
  std::vector<std::pair<std::string, double>> exposed_comm;
  double bubble = 0;  // seconds idle in the pipeline's schedule (0 without one)
  // Seconds runnable while the node's other ranks hold its shared CPU cores (0 on a device of
  // its own): the step of this rank is compute + exposed comm + bubble + cores_wait (for a
  // pipeline, exactly on the ranks whose schedule was simulated: rank 0's data and tp
  // coordinates; others whose shards differ come within that difference).
  double cores_wait = 0;

  double total_exposed_comm() const;
};

struct StepTimePrediction {
  double step = 0;  // seconds: the slowest rank's step
  int slowest = 0;  // that rank
  std::vector<RankStepTime> ranks;
};

// What a predicted step gives: tokens per second over the whole mesh, and model FLOP
// utilisation, the model's training FLOPs (ModelSpec::training_flops) per second over the mesh's
// dense peak in the compute dtype.
struct Throughput {
  double tokens_per_s = 0;
  double mfu = 0;
};

// What a kernel's time grows with: its FLOPs, or its bytes when it has no products.
double kernel_work(const ops::OpWork& work);

// The dtype the layout's matrix products run in: FSDP's param_dtype, f32 without a data axis.
DType compute_dtype(const PlanLayout& layout);

// `replayed`: replay_ranks(model, layout, workload). InvalidArgument for a profile that fails
// its check or replays of another mesh.
StepTimePrediction predict_step_time(const PlanLayout& layout, const Workload& workload,
                                     const RankReplays& replayed, const MachineProfile& machine);

// InvalidArgument for a step of 0 seconds or less.
Throughput predicted_throughput(const ModelSpec& model, const PlanLayout& layout,
                                const Workload& workload, double step_seconds,
                                const MachineProfile& machine);

}  // namespace meshtrain
