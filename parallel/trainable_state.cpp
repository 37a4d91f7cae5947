#include "parallel/trainable_state.h"

namespace meshtrain {

WholeParameters::WholeParameters(Model& model) : model_(model) {
  for (Parameter* p : model.parameters())
    if (p->requires_grad()) trainable_.push_back(p);
}

std::vector<OptimizerSlot> WholeParameters::optimizer_slots() {
  std::vector<OptimizerSlot> slots;
  for (Parameter* p : trainable_)
    slots.push_back({p->name(), p->value(), p->grad(), p->decays(), p->layout(), p->tied_copy()});
  return slots;
}

void WholeParameters::zero_grad() {
  for (Parameter* p : trainable_) p->grad().zero_();
}

void WholeParameters::for_each_compute_value(const ParameterVisitor& fn) {
  for (Parameter* p : model_.parameters()) fn(*p, p->value());
}

}  // namespace meshtrain
