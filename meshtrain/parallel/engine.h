// Engine: runs a model's layers forward and backward for one micro-batch and fires the strategies'
// hooks around each unit. It knows nothing about communication; strategies do.
#pragma once

#include <vector>

#include "meshtrain/parallel/activation_checkpointing.h"
#include "meshtrain/parallel/hooks.h"
#include "meshtrain/parallel/model.h"
#include "meshtrain/parallel/units.h"

namespace meshtrain {

// Which part of backward to run: all of it, or the input or weight part of a split backward
// (pre-backward hooks fire with the input part, post-backward hooks after the weight part).
enum class BackwardPart { full, input, weight };

// A run of consecutive layers; last = -1 means through the last layer.
struct LayerSpan {
  int first = 0;
  int last = -1;
};

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
  // Which layers keep only their input and run forward again in backward (none by default).
  void set_activation_checkpointing(const ActivationCheckpointing& ac);

  void begin_micro_batch(int index, int count);
  // Runs layers [first, last] (the whole model by default; a pipeline chunk under PP).
  void forward(MicroBatch& mb, LayerSpan span = {});
  // The same layers for a pass without backward (validation): each layer's saved tensors are
  // dropped as soon as it has run, so only the activation between layers stays.
  void forward_only(MicroBatch& mb, LayerSpan span = {});
  // Ends a forward-only pass: the hooks release what they kept for a backward.
  void finish_forward_only();
  // `last_backward`: no later backward of this step reaches these layers' units.
  void backward(MicroBatch& mb, LayerSpan span = {}, bool last_backward = true,
                BackwardPart part = BackwardPart::full);
  void finish_backward();

 private:
  Model& model_;
  UnitPlan plan_;
  std::vector<Layer*> layers_;
  std::vector<StepHooks*> hooks_;
  std::vector<bool> recomputed_;  // per layer

  void run_forward(MicroBatch& mb, LayerSpan span, bool for_backward);
  // Runs layer l forward again from the input forward kept, refilling its saved tensors.
  void recompute(MicroBatch& mb, int l);
  // The span with last resolved, checked against the model.
  LayerSpan resolve(LayerSpan span) const;
};

}  // namespace meshtrain
