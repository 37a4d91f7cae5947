// Engine: runs a model's layers forward and backward for one micro-batch and fires the strategies'
// hooks around each unit. It knows nothing about communication; strategies do.
#pragma once

#include <vector>

#include "parallel/hooks.h"
#include "parallel/model.h"
#include "parallel/units.h"

namespace meshtrain {

class Engine {
 public:
  Engine(Model& model, UnitPlan plan);
  // The model's default units and no hooks: the plain single-rank forward and backward.
  explicit Engine(Model& model);

  Model& model() { return model_; }
  const UnitPlan& unit_plan() const { return plan_; }
  // Hooks fire in the order added (pre hooks) and in reverse order (post hooks), like nested scopes.
  void add_hooks(StepHooks* hooks);
  const std::vector<StepHooks*>& hooks() const { return hooks_; }

  void begin_micro_batch(int index, int count);
  void forward(MicroBatch& mb);
  void backward(MicroBatch& mb);
  void finish_backward();

 private:
  Model& model_;
  UnitPlan plan_;
  std::vector<Layer*> layers_;
  std::vector<StepHooks*> hooks_;
};

}  // namespace meshtrain
