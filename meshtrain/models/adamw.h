// AdamW with PyTorch semantics (torch.optim.AdamW) over optimizer slots: decoupled weight decay on
// the slots that decay (matrices and embeddings), bias-corrected moments. The moments are
// allocated on the first step, under MemoryCategory::optimizer, beside each slot's tensor.
#pragma once

#include <cstdint>
#include <vector>

#include "meshtrain/core/ops/adamw_hyper.h"
#include "meshtrain/parallel/optimizer_slot.h"

namespace meshtrain {

struct AdamWConfig {
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;  // applied only where slot.decays
};

class AdamW {
 public:
  explicit AdamW(const AdamWConfig& config = {});

  // One step at learning rate lr. Every call must pass the same slots (names and sizes) in the
  // same order; a mismatch is an InvalidArgument naming the slot.
  void step(const std::vector<OptimizerSlot>& slots, float lr);
  int64_t steps_taken() const { return steps_; }

  // Allocates the (zero) moments for `slots` as the first step would, if it has not run: a
  // checkpoint then saves or restores them before any step.
  void prepare_state(const std::vector<OptimizerSlot>& slots);
  // The step count a restored run continues from (the bias correction depends on it).
  void set_steps_taken(int64_t steps);
  // The moments of slot i, for checkpoints and tests (undefined before the first step).
  const Tensor& exp_avg(size_t i) const { return state_.at(i).exp_avg; }
  const Tensor& exp_avg_sq(size_t i) const { return state_.at(i).exp_avg_sq; }

 private:
  struct SlotState {
    std::string name;
    Tensor exp_avg;
    Tensor exp_avg_sq;
  };
  void allocate_state(const std::vector<OptimizerSlot>& slots);

  AdamWConfig config_;
  int64_t steps_ = 0;
  std::vector<SlotState> state_;
};

// Gradient clipping: given the global gradient norm (computed by the caller, which under sharding
// needs communication), scales every slot's gradient by max_norm / norm when norm > max_norm.
// Returns the factor applied (1 when no clipping; max_norm <= 0 disables clipping).
float clip_grads(const std::vector<OptimizerSlot>& slots, double global_norm, float max_norm);
// This rank's part of the squared gradient norm: the sum over its slots.
double grad_sum_squares(const std::vector<OptimizerSlot>& slots);

}  // namespace meshtrain
