#include "meshtrain/models/single_rank.h"

#include "meshtrain/core/error.h"
#include "meshtrain/parallel/engine.h"

namespace meshtrain {

void zero_grad(Model& model) {
  for (Parameter* p : model.parameters())
    if (p->requires_grad()) p->grad().zero_();
}

std::vector<OptimizerSlot> parameter_slots(Model& model) {
  std::vector<OptimizerSlot> slots;
  for (Parameter* p : model.parameters())
    if (p->requires_grad())
      slots.push_back({p->name(), p->value(), p->grad(), p->decays(), p->layout(), false});
  return slots;
}

double forward(Model& model, MicroBatch& mb) {
  MT_CHECK(mb.tokens.defined() && mb.tokens.numel() > 0, "forward: mb.tokens must hold tokens");
  mb.loss_sum = 0.0;
  Engine(model).forward(mb);
  return mb.loss_sum / static_cast<double>(mb.tokens.numel());
}

void backward(Model& model, MicroBatch& mb) {
  mb.loss_scale = 1.0f / static_cast<float>(mb.tokens.numel());
  Engine(model).backward(mb);
}

}  // namespace meshtrain
