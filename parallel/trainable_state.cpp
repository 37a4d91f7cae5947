#include "parallel/trainable_state.h"

#include "core/ops/ops.h"

namespace meshtrain {

WholeParameters::WholeParameters(Model& model) {
  for (Parameter* p : model.parameters())
    if (p->requires_grad()) trainable_.push_back(p);
}

std::vector<OptimizerSlot> WholeParameters::optimizer_slots() {
  std::vector<OptimizerSlot> slots;
  for (Parameter* p : trainable_) slots.push_back({p->name(), p->value(), p->grad(), p->decays()});
  return slots;
}

double WholeParameters::grad_norm_squared() {
  double total = 0.0;
  for (Parameter* p : trainable_) total += ops::sum_squares(p->grad());
  return total;
}

void WholeParameters::zero_grad() {
  for (Parameter* p : trainable_) p->grad().zero_();
}

}  // namespace meshtrain
