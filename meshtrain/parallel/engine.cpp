#include "meshtrain/parallel/engine.h"

#include "meshtrain/core/error.h"
#include "meshtrain/core/trace/recorder.h"

namespace meshtrain {

namespace {
// The arguments of a layer's span: its unit and micro-batch (only when tracing).
void annotate(trace::Scope& span, const UnitPlan& plan, int layer, const MicroBatch& mb) {
  if (!trace::current()) return;
  span.arg("unit", plan.units[plan.unit_of_layer[layer]].name);
  span.arg("micro_batch", std::to_string(mb.index));
}

const char* backward_name(BackwardPart part) {
  switch (part) {
    case BackwardPart::full: return "backward";
    case BackwardPart::input: return "backward_input";
    case BackwardPart::weight: return "backward_weight";
  }
  return "backward";
}
}  // namespace

Engine::Engine(Model& model, UnitPlan plan)
    : model_(model),
      plan_(std::move(plan)),
      layers_(model.layers()),
      recomputed_(layers_.size(), false) {
  MT_CHECK(layers_.size() == plan_.unit_of_layer.size(), "the unit plan is for a model of ",
           plan_.unit_of_layer.size(), " layers, this model has ", layers_.size());
}

Engine::Engine(Model& model) : Engine(model, make_unit_plan(model, model.default_units())) {}

void Engine::add_hooks(StepHooks* hooks) {
  MT_CHECK(hooks != nullptr, "add_hooks(nullptr)");
  hooks_.push_back(hooks);
}

void Engine::set_activation_checkpointing(const ActivationCheckpointing& ac) {
  recomputed_ = recomputed_layers(plan_, ac);
}

void Engine::recompute(MicroBatch& mb, int l) {
  const auto input = mb.recompute_inputs.find(l);
  MT_ASSERT(input != mb.recompute_inputs.end(), "layer ", l, " was not run forward to recompute");
  const Tensor gradient = mb.hidden;
  mb.hidden = input->second;
  mb.recompute_inputs.erase(input);
  {
    trace::Scope layer_span(trace::Kind::layer, [&] { return "recompute " + layers_[l]->name(); });
    annotate(layer_span, plan_, l, mb);
    layers_[l]->forward(mb, l);
  }
  mb.hidden = gradient;
}

void Engine::begin_micro_batch(int index, int count) {
  for (StepHooks* h : hooks_) h->begin_micro_batch(index, count);
}

LayerSpan Engine::resolve(LayerSpan span) const {
  const int count = static_cast<int>(layers_.size());
  if (span.last < 0) span.last = count - 1;
  MT_CHECK(span.first >= 0 && span.first <= span.last && span.last < count, "layers [",
           span.first, ", ", span.last, "] outside the model's ", count, " layers");
  return span;
}

void Engine::forward(MicroBatch& mb, LayerSpan span) { run_forward(mb, span, true); }

void Engine::forward_only(MicroBatch& mb, LayerSpan span) { run_forward(mb, span, false); }

void Engine::run_forward(MicroBatch& mb, LayerSpan span, bool for_backward) {
  span = resolve(span);
  for (int l = span.first; l <= span.last; ++l) {
    const int unit = plan_.unit_of_layer[l];
    if (plan_.first_in_unit(l))
      for (StepHooks* h : hooks_) h->pre_forward(unit, mb.index);
    {
      trace::Scope layer_span(trace::Kind::layer, [&] { return "forward " + layers_[l]->name(); });
      annotate(layer_span, plan_, l, mb);
      const Tensor input = mb.hidden;
      layers_[l]->forward(mb, l);
      // A forward-only pass keeps nothing; training keeps a recomputed layer's input only (and
      // inference, without targets, nothing to recompute from).
      if (!for_backward) {
        mb.saved.erase(l);
      } else if (recomputed_[l] && mb.targets.defined()) {
        mb.saved.erase(l);
        mb.recompute_inputs[l] = input;
      }
    }
    if (plan_.last_in_unit(l))
      for (auto h = hooks_.rbegin(); h != hooks_.rend(); ++h) (*h)->post_forward(unit, mb.index);
  }
}

void Engine::backward(MicroBatch& mb, LayerSpan span, bool last_backward, BackwardPart part) {
  span = resolve(span);
  const bool input = part != BackwardPart::weight, weight = part != BackwardPart::input;
  for (int l = span.last; l >= span.first; --l) {
    const int unit = plan_.unit_of_layer[l];
    if (input && plan_.last_in_unit(l))
      for (StepHooks* h : hooks_) h->pre_backward(unit, mb.index);
    if (input && recomputed_[l]) recompute(mb, l);
    {
      trace::Scope layer_span(trace::Kind::layer, [&] {
        return std::string(backward_name(part)) + " " + layers_[l]->name();
      });
      annotate(layer_span, plan_, l, mb);
      if (part == BackwardPart::full) layers_[l]->backward(mb, l);
      if (part == BackwardPart::input) layers_[l]->backward_input(mb, l);
      if (part == BackwardPart::weight) layers_[l]->backward_weight(mb, l);
    }
    if (weight && plan_.first_in_unit(l))
      for (auto h = hooks_.rbegin(); h != hooks_.rend(); ++h)
        (*h)->post_backward(unit, mb.index, last_backward);
  }
}

void Engine::finish_backward() {
  for (StepHooks* h : hooks_) h->finish_backward();
}

void Engine::finish_forward_only() {
  for (StepHooks* h : hooks_) h->finish_forward_only();
}

}  // namespace meshtrain
