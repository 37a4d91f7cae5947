// TrainableState: who owns the values the optimizer updates. Without a data-parallel strategy
// that is every parameter, whole; FSDP replaces it with this rank's shards.
#pragma once

#include <vector>

#include "parallel/model.h"
#include "parallel/optimizer_slot.h"

namespace meshtrain {

class TrainableState {
 public:
  virtual ~TrainableState() = default;
  // The tensors the optimizer steps, stable across steps (its moments are keyed by position).
  virtual std::vector<OptimizerSlot> optimizer_slots() = 0;
  // Squared L2 norm of the whole model's gradient, each element counted once across all ranks.
  virtual double grad_norm_squared() = 0;
  virtual void zero_grad() = 0;
};

// Every trainable parameter of the model, whole, on this rank (one rank, or replicated data
// parallelism after gradients are all-reduced).
class WholeParameters : public TrainableState {
 public:
  explicit WholeParameters(Model& model);
  std::vector<OptimizerSlot> optimizer_slots() override;
  double grad_norm_squared() override;
  void zero_grad() override;

 private:
  std::vector<Parameter*> trainable_;
};

}  // namespace meshtrain
