// PipelineRunner: the one runtime for every pipeline schedule. It executes this rank's action list
// of a Schedule (schedule.h) for the step's micro-batches: each F and B (or I, W) runs one of the
// rank's stages through the engine, each SEND/RECV moves an activation or its gradient over the
// pp axis (consecutive ones as one batch_p2p, so neighbours that receive first cannot deadlock). Receivers know the shape in advance (Model::activation_shape); sends are posted and
// waited for only when the buffer is no longer needed; every wait has the communicator's timeout.
//
// After the schedule the runner completes the strategies' gradient reductions, then sums the
// gradients of parameters tied across pipeline ranks (GPT-2's wte on the first and last stage) so
// that both copies take the same optimizer step.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "meshtrain/parallel/step_runner.h"
#include "meshtrain/parallel/trainable_state.h"
#include "meshtrain/plugins/pp/schedule.h"
#include "meshtrain/plugins/pp/schedule_generators.h"

namespace meshtrain {

// What the pp strategy tells its runner about this rank.
struct PipelinePlacement {
  ScheduleKind schedule = ScheduleKind::one_f_one_b;
  int ranks = 1;
  int virtual_stages = 1;
  int rank = 0;                      // on the pp axis
  std::vector<int> stages;           // this rank's stages, in order
  std::vector<LayerSpan> spans;      // their layers, in the engine's (local) indices
  // Parameters this rank shares with other pp ranks, by name, with those ranks.
  std::map<std::string, std::vector<int>> tied;
};

// Where this rank's time went in the last step: computing each kind of action, and the rest
// (waiting for receives, the reductions after the schedule): the measured bubble.
struct PipelineTiming {
  double step_s = 0;
  double forward_s = 0;          // all F actions
  double backward_input_s = 0;   // all B and I actions (B: the whole backward)
  double backward_weight_s = 0;  // all W actions
  // Blocked on other stages: waiting for an activation or gradient to arrive, and at the end for
  // the last sends to be taken. The bubble, as this rank lives it.
  double transfer_wait_s = 0;
  int forwards = 0, backwards = 0, weights = 0;
  double compute_s() const { return forward_s + backward_input_s + backward_weight_s; }
  PipelineTiming& operator+=(const PipelineTiming& other);  // sums over steps or ranks
  double idle_fraction() const { return step_s > 0 ? 1.0 - compute_s() / step_s : 0.0; }
};

class PipelineRunner : public StepRunner {
 public:
  // activation_dtype: the dtype of the hidden state passed between stages (what layers compute in).
  // It lives on the device of the model's parameters.
  PipelineRunner(Engine& engine, TrainableState& state, DeviceMesh& mesh,
                 PipelinePlacement placement, DType activation_dtype = DType::f32);

  // Forward only, through make_forward_schedule's pass over the same stages.
  double evaluate(std::vector<MicroBatch>& micro_batches, double global_tokens) override;
  // The schedule for `micro_batches` (generated once per count).
  const Schedule& schedule(int micro_batches);
  const PipelinePlacement& placement() const { return placement_; }
  // The last training step's (evaluate leaves it as it was).
  const PipelineTiming& last_timing() const { return timing_; }
  std::optional<double> last_bubble_s() const override { return timing_.transfer_wait_s; }

 protected:
  // This rank's actions of the schedule, the reductions, then the tied gradients' sums.
  void run_micro_batches(std::vector<MicroBatch>& micro_batches) override;

 private:
  // Runs this rank's actions of `plan`; F keeps what backward needs only when `for_backward`.
  PipelineTiming execute(const Schedule& plan, std::vector<MicroBatch>& micro_batches,
                         bool for_backward);
  void sum_tied_gradients();
  // Where a stage boundary's activation (or its gradient) for `mb` is received.
  Tensor boundary_buffer(const MicroBatch& mb);

  TrainableState& state_;
  Communicator& pp_;
  PipelinePlacement placement_;
  DType activation_dtype_;
  Device activation_device_;
  std::map<int, Schedule> schedules_;          // by micro-batch count
  std::map<int, Schedule> forward_schedules_;  // likewise
  PipelineTiming timing_;
};

}  // namespace meshtrain
