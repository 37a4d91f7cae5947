#include "parallel/engine.h"

#include "core/error.h"

namespace meshtrain {

Engine::Engine(Model& model, UnitPlan plan)
    : model_(model), plan_(std::move(plan)), layers_(model.layers()) {
  MT_CHECK_EQ(layers_.size(), plan_.unit_of_layer.size(), "unit plan does not match the model");
}

Engine::Engine(Model& model) : Engine(model, make_unit_plan(model, model.default_units())) {}

void Engine::add_hooks(StepHooks* hooks) {
  MT_CHECK(hooks != nullptr, "add_hooks(nullptr)");
  hooks_.push_back(hooks);
}

void Engine::begin_micro_batch(int index, int count) {
  for (StepHooks* h : hooks_) h->begin_micro_batch(index, count);
}

void Engine::forward(MicroBatch& mb) {
  for (int s = 0; s < static_cast<int>(layers_.size()); ++s) {
    const int unit = plan_.unit_of_layer[s];
    if (plan_.first_in_unit(s))
      for (StepHooks* h : hooks_) h->pre_forward(unit);
    layers_[s]->forward(mb, s);
    if (plan_.last_in_unit(s))
      for (auto h = hooks_.rbegin(); h != hooks_.rend(); ++h) (*h)->post_forward(unit);
  }
}

void Engine::backward(MicroBatch& mb) {
  for (int s = static_cast<int>(layers_.size()) - 1; s >= 0; --s) {
    const int unit = plan_.unit_of_layer[s];
    if (plan_.last_in_unit(s))
      for (StepHooks* h : hooks_) h->pre_backward(unit);
    layers_[s]->backward(mb, s);
    if (plan_.first_in_unit(s))
      for (auto h = hooks_.rbegin(); h != hooks_.rend(); ++h) (*h)->post_backward(unit);
  }
}

void Engine::finish_backward() {
  for (StepHooks* h : hooks_) h->finish_backward();
}

}  // namespace meshtrain
