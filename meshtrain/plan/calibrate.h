// Measuring this machine for the step-time model (meshtrain plan --calibrate, docs/planner.md):
// the kernels as the code calls them, and the local backend's collectives.
//
// Kernels: single-rank training steps of a few model shapes run on this machine's CPU with the
// threads a rank gets, each kernel's calls timed (their trace spans) beside their counted work
// (ops::OpCounts: FLOPs, or bytes for kernels without products). Each op then gets the
// least-squares fit seconds = per_call x calls + per_unit x work over the shapes, each shape's
// error relative to its time: the fixed cost of a call (threads waking, small shapes' poor
// blocking) and the rate at which its work goes. The fits replace the roofline for the ops they
// cover (MachineProfile::kernels); the steps' time outside the kernels, per kernel call, is the
// host's (MachineProfile::host_per_call).
//
// Collectives: all-gathers, reduce-scatters, all-reduces and transfers (a send and a receive a
// rank, shifting around the group) in groups of every size that divides the local ranks (a thread
// each), every group at once, fitted per kind and group size as latency + bytes sent / bandwidth
// (the alpha-beta model: MachineProfile::collectives), the same within and across "nodes" (one
// process). The bandwidth from the fastest calls of each of a range of sizes over the rounds, each
// from a barrier; the latency as a step's calls meet it, each rank arriving from compute and
// sleeping in its wait (its wake-ups cost more than the best case after a barrier), the median of
// a few loops a round.
//
// Cores: the profile records the cores and threads per rank, so that layouts whose threads need
// more than the cores wait for them (step_time.h), and the share of the cores ranks filling them
// put to use (MachineProfile::shared_core_efficiency): a real FSDP step over every local rank,
// timed in short rounds among the kernels' rounds (cores_share_of_step). The fits are measured in
// f32; a bf16 layout uses them too.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "meshtrain/models/model_spec.h"
#include "meshtrain/plan/machine_profile.h"
#include "meshtrain/plan/plan_layout.h"
#include "meshtrain/plan/step_time.h"

namespace meshtrain {

// One op's calls in one measured step (or several steps of one shape, summed).
struct KernelSample {
  int64_t calls = 0;
  double work = 0;  // FLOPs, or bytes for an op without products
  double seconds = 0;
};

// Non-negative least squares of seconds = per_call x calls + per_unit x work. InvalidArgument
// without samples.
KernelFit fit_kernel(const std::vector<KernelSample>& samples);

// What `steps` timed steps of one shape took: each op's kernels (traced), and the host's work
// around them (the steps' wall time untraced less their kernels', over all the kernel calls:
// dispatch, allocation, the runner's and optimizer's bookkeeping).
struct MeasuredSteps {
  std::map<std::string, KernelSample> kernels;
  KernelSample host;  // calls: every kernel call; work 0
};

// `steps` timed steps (after one untimed), twice, of `model` on one rank of this machine's CPU,
// with the threads the caller has (ops::cpu::cpu_threads).
MeasuredSteps measure_kernels(const ModelSpec& model, const Workload& workload, int steps);

struct CalibrationOptions {
  int ranks = 2;             // local ranks the collectives run over
  int threads_per_rank = 1;  // as a run with --threads gives each rank
  int steps = 3;             // timed steps per model shape and round
  // calibrate_this_machine's rounds (Calibration::measure_round): each shape's kernels are the
  // median of the rounds' measurements.
  int rounds = 3;
};

// The share of `machine`'s cores (MachineProfile::shared_core_efficiency) that the ranks of a
// step predicted on it (one node) put to use for their kernels when the step took
// `measured_seconds`: the kernels' thread-seconds over the cores' time less the communication the
// slowest rank waits for, within [0.05, 1]; 1 for a step no longer than that communication. With
// it in `machine`, a step the cores bound predicts as measured. InvalidArgument for a profile
// without cores.
double cores_share_of_step(const StepTimePrediction& predicted, const MachineProfile& machine,
                           double measured_seconds);

// A calibration taken a round at a time, so that its rounds can share the minutes of the caller's
// own measurements (meshtrain sweep --calibrate takes one before each of its rounds): this
// machine's pace drifts from minute to minute, and a profile measured in another minute than the
// runs it is compared with is off by the drift.
class Calibration {
 public:
  // InvalidArgument for fewer than 2 ranks, 1 thread per rank, 1 step or 1 round.
  explicit Calibration(const CalibrationOptions& options);

  // One round: every shape's kernels, the collectives of every group size, then five rounds of
  // the shared-cores step.
  void measure_round();
  // A profile named "calibrated (N thread(s) per rank)" that starts from the cpu preset (its peaks
  // times the threads per rank, for MFU and any op no shape measured) and replaces its kernel and
  // collective figures with the fits of the rounds so far. InvalidArgument before the first round.
  MachineProfile finish() const;

 private:
  CalibrationOptions options_;
  std::vector<std::vector<MeasuredSteps>> kernel_rounds_;  // per shape, one per round
  // Per kind of collective and group size, every round's: calls of each size, latencies.
  std::map<std::pair<CommOp, int>, std::vector<KernelSample>> collective_calls_;
  std::map<std::pair<CommOp, int>, std::vector<double>> call_latency_;
  std::vector<double> shared_cores_steps_;                 // seconds, five per round
};

// Calibration(options), options.rounds rounds in a row, finished.
MachineProfile calibrate_this_machine(const CalibrationOptions& options);

}  // namespace meshtrain
