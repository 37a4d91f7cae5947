#include "meshtrain/parallel/trainable_state.h"

namespace meshtrain {

WholeParameters::WholeParameters(Model& model, const DeviceMesh& mesh,
                                 const ParameterSource& values)
    : model_(model) {
  for (Parameter* p : model.parameters()) {
    {
      MemoryCategoryScope scope(MemoryCategory::param);
      p->set_value(Tensor::empty(p->shape(), DType::f32, p->device()));
    }
    fill_local(values, *p, p->layout(), mesh.layout(), mesh.rank(), p->value());
    if (!p->requires_grad()) continue;
    MemoryCategoryScope scope(MemoryCategory::grad);
    p->set_grad(Tensor::zeros(p->shape(), DType::f32, p->device()));
    trainable_.push_back(p);
  }
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

std::vector<OptimizerSlot> WholeParameters::held_slots() {
  std::vector<OptimizerSlot> slots;
  for (Parameter* p : model_.parameters()) {
    OptimizerSlot slot;
    slot.name = p->name();
    slot.param = p->value();
    if (p->requires_grad()) slot.grad = p->grad();
    slot.decays = p->decays();
    slot.layout = p->layout();
    slot.tied_copy = p->tied_copy();
    slots.push_back(std::move(slot));
  }
  return slots;
}

}  // namespace meshtrain
