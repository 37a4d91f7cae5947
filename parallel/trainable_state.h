// TrainableState: who owns the values the optimizer updates. Without a data-parallel strategy
// that is every parameter, whole (its tensor-parallel piece under TP); FSDP replaces it with this
// rank's shards.
#pragma once

#include <functional>
#include <vector>

#include "parallel/model.h"
#include "parallel/optimizer_slot.h"

namespace meshtrain {

// fn(parameter, value): the parameter's compute piece (its TP piece; whole without TP), fp32.
using ParameterVisitor = std::function<void(const Parameter&, const Tensor&)>;

class TrainableState {
 public:
  virtual ~TrainableState() = default;
  // The tensors the optimizer steps, stable across steps (its moments are keyed by position),
  // each with its layout (see parallel/grad_norm.h for the global norm over them).
  virtual std::vector<OptimizerSlot> optimizer_slots() = 0;
  virtual void zero_grad() = 0;
  // Collective over the data axes: visits every parameter's compute piece, assembled from the
  // data-parallel shards, a few at a time (FSDP: one unit unsharded at a time).
  virtual void for_each_compute_value(const ParameterVisitor& fn) = 0;
};

// Every trainable parameter of the model, whole, on this rank (one rank, or replicated data
// parallelism after gradients are all-reduced).
class WholeParameters : public TrainableState {
 public:
  explicit WholeParameters(Model& model);
  std::vector<OptimizerSlot> optimizer_slots() override;
  void zero_grad() override;
  void for_each_compute_value(const ParameterVisitor& fn) override;

 private:
  Model& model_;
  std::vector<Parameter*> trainable_;
};

}  // namespace meshtrain
