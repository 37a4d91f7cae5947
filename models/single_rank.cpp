#include "models/single_rank.h"

#include "core/error.h"

namespace meshtrain {

void zero_grad(Model& model) {
  for (Parameter* p : model.parameters())
    if (p->requires_grad()) p->grad().zero_();
}

std::vector<OptimizerSlot> parameter_slots(Model& model) {
  std::vector<OptimizerSlot> slots;
  for (Parameter* p : model.parameters())
    if (p->requires_grad()) slots.push_back({p->name(), p->value(), p->grad(), p->decays()});
  return slots;
}

double forward(Model& model, MicroBatch& mb) {
  MT_CHECK(mb.tokens.defined() && mb.tokens.numel() > 0, "forward: mb.tokens must hold tokens");
  mb.loss_sum = 0.0;
  const std::vector<Stage*> stages = model.stages();
  for (size_t i = 0; i < stages.size(); ++i) stages[i]->forward(mb, static_cast<int>(i));
  return mb.loss_sum / static_cast<double>(mb.tokens.numel());
}

void backward(Model& model, MicroBatch& mb) {
  mb.loss_scale = 1.0f / static_cast<float>(mb.tokens.numel());
  const std::vector<Stage*> stages = model.stages();
  for (size_t i = stages.size(); i-- > 0;) stages[i]->backward(mb, static_cast<int>(i));
}

}  // namespace meshtrain
