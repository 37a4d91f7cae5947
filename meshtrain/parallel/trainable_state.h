// TrainableState: who owns the values the optimizer updates. Without a data-parallel strategy
// that is every parameter, whole (its tensor-parallel piece under TP); FSDP replaces it with this
// rank's shards.
#pragma once

#include <vector>

#include "meshtrain/mesh/device_mesh.h"

#include "meshtrain/parallel/model.h"
#include "meshtrain/parallel/parameter_source.h"
#include "meshtrain/parallel/optimizer_slot.h"

namespace meshtrain {

class TrainableState {
 public:
  virtual ~TrainableState() = default;
  // The tensors the optimizer steps, stable across steps (its moments are keyed by position),
  // each with its layout (see meshtrain/parallel/grad_norm.h for the global norm over them).
  virtual std::vector<OptimizerSlot> optimizer_slots() = 0;
  virtual void zero_grad() = 0;
  // Every parameter slice this rank holds, frozen ones too (with no gradient): what checkpoints
  // store and export gathers.
  virtual std::vector<OptimizerSlot> held_slots() = 0;
};

// Every trainable parameter of the model, whole, on this rank (one rank, or replicated data
// parallelism after gradients are all-reduced).
class WholeParameters : public TrainableState {
 public:
  // Allocates each parameter's (TP-local) value, filled from `values`, and a zeroed gradient for
  // the trainable ones.
  WholeParameters(Model& model, const DeviceMesh& mesh, const ParameterSource& values);
  std::vector<OptimizerSlot> optimizer_slots() override;
  void zero_grad() override;
  std::vector<OptimizerSlot> held_slots() override;

 private:
  Model& model_;
  std::vector<Parameter*> trainable_;
};

}  // namespace meshtrain
