// StepHooks: where strategies attach to a training step. The engine fires the unit hooks around
// each unit's compute (see meshtrain/parallel/model.h for when), told which micro-batch it is; the step
// hooks fire around the whole step.
#pragma once

namespace meshtrain {

class StepHooks {
 public:
  virtual ~StepHooks() = default;
  // Micro-batch `index` of `count` in this optimizer step is about to run (sequential runner).
  virtual void begin_micro_batch(int /*index*/, int /*count*/) {}
  virtual void pre_forward(int /*unit*/, int /*micro_batch*/) {}
  virtual void post_forward(int /*unit*/, int /*micro_batch*/) {}
  virtual void pre_backward(int /*unit*/, int /*micro_batch*/) {}
  // `last_backward`: no later backward of this step reaches the unit, so its gradients are final
  // (the runner knows: the last micro-batch, or under a pipeline schedule its last backward).
  virtual void post_backward(int /*unit*/, int /*micro_batch*/, bool /*last_backward*/) {}
  // Every micro-batch has run backward: gradients must be complete when this returns.
  virtual void finish_backward() {}
  // A forward-only pass (validation) has run every micro-batch and no backward follows: what was
  // kept for one (full parameters) must be released when this returns.
  virtual void finish_forward_only() {}
};

}  // namespace meshtrain
