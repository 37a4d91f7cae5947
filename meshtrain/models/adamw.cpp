#include "meshtrain/models/adamw.h"

#include <cmath>

#include "meshtrain/core/error.h"
#include "meshtrain/core/ops/ops.h"

namespace meshtrain {

AdamW::AdamW(const AdamWConfig& config) : config_(config) {
  MT_CHECK(config.beta1 >= 0.0f && config.beta1 < 1.0f, "AdamW: beta1 must be in [0, 1), got ",
           config.beta1);
  MT_CHECK(config.beta2 >= 0.0f && config.beta2 < 1.0f, "AdamW: beta2 must be in [0, 1), got ",
           config.beta2);
  MT_CHECK(config.eps > 0.0f, "AdamW: eps must be > 0, got ", config.eps);
  MT_CHECK(config.weight_decay >= 0.0f, "AdamW: weight_decay must be >= 0, got ",
           config.weight_decay);
}

void AdamW::allocate_state(const std::vector<OptimizerSlot>& slots) {
  MemoryCategoryScope scope(MemoryCategory::optimizer);
  for (const OptimizerSlot& slot : slots) {
    const Device device = slot.param.device();
    state_.push_back({slot.name, Tensor::zeros({slot.param.numel()}, DType::f32, device),
                      Tensor::zeros({slot.param.numel()}, DType::f32, device)});
  }
}

void AdamW::prepare_state(const std::vector<OptimizerSlot>& slots) {
  if (state_.empty()) allocate_state(slots);
}

void AdamW::set_steps_taken(int64_t steps) {
  MT_CHECK(steps >= 0, "AdamW::set_steps_taken: a step count must not be negative, got ", steps);
  steps_ = steps;
}

void AdamW::step(const std::vector<OptimizerSlot>& slots, float lr) {
  prepare_state(slots);
  MT_CHECK(slots.size() == state_.size(),
           "AdamW::step: the slots must be those of the first step: got ", slots.size(),
           " slots, the optimizer state holds ", state_.size());
  ++steps_;
  for (size_t i = 0; i < slots.size(); ++i) {
    const OptimizerSlot& slot = slots[i];
    MT_CHECK(slot.name == state_[i].name && slot.param.numel() == state_[i].exp_avg.numel(),
             "AdamW::step: slot ", i, " is '", slot.name, "' with ", slot.param.numel(),
             " elements, but the optimizer state holds '", state_[i].name, "' with ",
             state_[i].exp_avg.numel());
    ops::AdamWHyper hyper;
    hyper.lr = lr;
    hyper.beta1 = config_.beta1;
    hyper.beta2 = config_.beta2;
    hyper.eps = config_.eps;
    hyper.weight_decay = slot.decays ? config_.weight_decay : 0.0f;
    ops::adamw_step(slot.param, slot.grad, state_[i].exp_avg, state_[i].exp_avg_sq, hyper, steps_);
  }
}

float clip_grads(const std::vector<OptimizerSlot>& slots, double global_norm, float max_norm) {
  MT_CHECK(std::isfinite(global_norm) && global_norm >= 0.0,
           "clip_grads: the global gradient norm must be finite and >= 0, got ", global_norm);
  if (max_norm <= 0.0f || global_norm <= max_norm) return 1.0f;
  const float factor = static_cast<float>(max_norm / global_norm);
  for (const OptimizerSlot& slot : slots) ops::scale(slot.grad, factor);
  return factor;
}

double grad_sum_squares(const std::vector<OptimizerSlot>& slots) {
  std::vector<Tensor> grads;
  for (const OptimizerSlot& slot : slots) grads.push_back(slot.grad);
  return ops::sum_squares(grads);
}

}  // namespace meshtrain
