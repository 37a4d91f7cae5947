// StepHooks: where strategies attach to a training step. The engine fires the unit hooks around
// each unit's compute (see parallel/model.h for when), the step hooks around the whole step.
#pragma once

namespace meshtrain {

class StepHooks {
 public:
  virtual ~StepHooks() = default;
  // Micro-batch `index` of `count` in this optimizer step is about to run.
  virtual void begin_micro_batch(int /*index*/, int /*count*/) {}
  virtual void pre_forward(int /*unit*/) {}
  virtual void post_forward(int /*unit*/) {}
  virtual void pre_backward(int /*unit*/) {}
  virtual void post_backward(int /*unit*/) {}
  // Every micro-batch has run backward: gradients must be complete when this returns.
  virtual void finish_backward() {}
};

}  // namespace meshtrain
