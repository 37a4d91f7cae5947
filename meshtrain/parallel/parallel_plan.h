// ParallelPlan: which strategy runs on which mesh axes. apply() validates the bindings against the
// mesh, applies the strategies in the documented order (pipeline, tensor, data; ties keep the order
// they were added in) and returns the engine and trainable state to train with.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "meshtrain/parallel/engine.h"
#include "meshtrain/parallel/step_runner.h"
#include "meshtrain/parallel/strategy.h"

namespace meshtrain {

struct ParallelModel {
  std::unique_ptr<Engine> engine;
  std::unique_ptr<TrainableState> state;
  std::unique_ptr<StepRunner> runner;  // runs a step's micro-batches through the engine
  DType compute_dtype = DType::f32;    // what layers compute in (FSDP's param_dtype)
};

class ParallelPlan {
 public:
  // A strategy bound twice, or an axis bound to two strategies, is an error.
  ParallelPlan& add(std::unique_ptr<Strategy> strategy, std::vector<std::string> axes);
  // The plan owns its strategies; it must outlive the returned model. Applies once. Every mesh
  // axis of size > 1 must be bound to a strategy ("dp" binds both data axes).
  // Each rank's pieces of the parameters are filled from `values`, the model's parameters having
  // no tensors (sharded initialisation: no rank holds the full model); without `values` the
  // model must hold its full values, which are released once placed.
  ParallelModel apply(DeviceMesh& mesh, Model& model, const ParameterSource* values = nullptr);
  // "tp[tp] fsdp[dp_replicate,dp_shard]": the strategies in order of application, with axes.
  std::string describe() const;
  // The strategy added under `name`, or null.
  Strategy* find(std::string_view name) const;

 private:
  struct Binding {
    std::unique_ptr<Strategy> strategy;
    std::vector<std::string> axes;
  };
  std::vector<Binding> bindings_;
  bool applied_ = false;
};

}  // namespace meshtrain
