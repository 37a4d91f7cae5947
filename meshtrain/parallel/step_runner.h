// StepRunner: one optimizer step's forward and backward over its micro-batches, or a forward-only
// pass over them (validation), below the trainer. The default runs the micro-batches one after
// another through the engine (the hooks are told each micro-batch's index); pipeline parallelism
// replaces it with a runner that executes a schedule.
#pragma once

#include <optional>
#include <vector>

#include "meshtrain/mesh/device_mesh.h"
#include "meshtrain/parallel/engine.h"

namespace meshtrain {

class StepRunner {
 public:
  StepRunner(Engine& engine, DeviceMesh& mesh) : engine_(engine), mesh_(mesh) {}
  virtual ~StepRunner() = default;

  // Runs every micro-batch forward and backward (set each one's loss_scale to 1 / global_tokens),
  // then completes the gradient reductions. Returns the mean token loss of the global batch: the
  // token losses summed over the data axes only (every tp rank holds the same loss, so one per tp
  // group counts), over global_tokens. Collective over the world.
  double run(std::vector<MicroBatch>& micro_batches, double global_tokens);
  // run() without summing the loss: numbers the micro-batches and sets their loss scale, runs
  // every one forward and backward, then completes the gradient reductions. Collective over the
  // strategies' groups only, never the world, so that it also runs for one rank alone over
  // shape-only groups (the planner's replay of a rank, meshtrain/plan/rank_replay.h). What a
  // runner of its own overrides (a pipeline's runs its schedule).
  void forward_backward(std::vector<MicroBatch>& micro_batches, double global_tokens);
  // Runs every micro-batch forward only (validation: no gradients, nothing kept for a backward,
  // the strategies' gathered parameters released at the end) and returns the mean token loss as
  // run() does. Collective over the world.
  virtual double evaluate(std::vector<MicroBatch>& micro_batches, double global_tokens);

  // This rank's pipeline bubble in the last forward_backward(): time blocked on other pipeline
  // stages; none without a pipeline.
  virtual std::optional<double> last_bubble_s() const { return std::nullopt; }

 protected:
  // The micro-batches, numbered and scaled, forward and backward, then the reductions.
  virtual void run_micro_batches(std::vector<MicroBatch>& micro_batches);
  // Numbers the micro-batches and sets their loss scale, 1 / global_tokens.
  static void prepare(std::vector<MicroBatch>& micro_batches, double global_tokens);
  // The global mean loss from the token losses the micro-batches added up on this rank.
  double reduce_loss(const std::vector<MicroBatch>& micro_batches, double global_tokens);

  Engine& engine_;
  DeviceMesh& mesh_;
};

}  // namespace meshtrain
