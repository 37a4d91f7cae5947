// Strategy: a parallelism plugin bound to mesh axes. A ParallelPlan applies strategies in a fixed
// order, as torchtitan does: pipeline split first, then tensor parallel, then data parallel
// (FSDP) on each stage's units.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "meshtrain/mesh/mesh_layout.h"
#include "meshtrain/parallel/hooks.h"
#include "meshtrain/parallel/model.h"
#include "meshtrain/parallel/parameter_source.h"
#include "meshtrain/parallel/step_runner.h"
#include "meshtrain/parallel/trainable_state.h"

namespace meshtrain {

class DeviceMesh;

enum class StrategyKind { pipeline = 0, tensor = 1, data = 2 };  // also the order of application
std::string_view strategy_kind_name(StrategyKind kind);

// activation_dtype: what layers compute in and pass between stages (the plan's compute_dtype).
using RunnerFactory = std::function<std::unique_ptr<StepRunner>(
    Engine&, TrainableState&, DeviceMesh&, DType activation_dtype)>;

// What strategies transform, in order. Each may narrow the model and replace the step runner
// (pipeline), parallelize layers (tensor parallel), regroup units, add hooks, and take over the
// trainable state (data parallel). Parameters arrive without tensors: strategies narrow their
// layouts, and whoever holds a parameter's tensor in the end fills it from `values`.
struct ParallelContext {
  DeviceMesh& mesh;
  const ParameterSource& values;
  Model* model;
  std::vector<UnitSpec> unit_specs;
  std::vector<StepHooks*> hooks;
  std::unique_ptr<TrainableState> state;
  RunnerFactory make_runner;  // empty: the default StepRunner
  // Set by the pp plugin, whose runner may run several micro-batches' forwards before their
  // backwards (any schedule, even on one pp rank: GPipe, or virtual stages): FSDP then keeps units
  // unsharded between them and reduces gradients once per step.
  bool pipelined = false;
  // The dtype parameters are unsharded in, and so what layers compute in (FSDP's param_dtype).
  DType compute_dtype = DType::f32;
};

// A run as planned, before any rank is built: what a strategy checks its layout against.
struct PlannedRun {
  const MeshLayout& mesh;
  std::vector<std::string> axes;  // the axes the strategy is bound to
  int64_t micro_batch_tokens = 0;  // token rows of one micro-batch on one data rank
  std::string micro_batch_tokens_origin;  // how the run arrives at them, for messages
};

// What a strategy leaves each rank of the model state (parameters, gradients, optimizer state).
struct ModelStateShare {
  double fraction = 1.0;  // of the whole model's
  bool on_host = false;   // kept in host memory, whatever the device (CPU offload)
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual std::string name() const = 0;
  virtual StrategyKind kind() const = 0;
  // Called once per plan with the axes the strategy is bound to (all present in ctx.mesh).
  // The strategy must outlive the training it configures (the plan owns it).
  virtual void apply(ParallelContext& ctx, const std::vector<std::string>& axes) = 0;
  // InvalidArgument when the strategy cannot transform `model` (whole, before any strategy ran;
  // its parameters need no tensors) bound to `axes` of `mesh`. ParallelPlan::apply calls it on
  // every rank before applying anything; a planner calls it with a model that holds no tensors.
  virtual void check_model(Model& /*model*/, const MeshLayout& /*mesh*/,
                           const std::vector<std::string>& /*axes*/) const {}
  // Before any rank is built: InvalidArgument when the strategy cannot run the planned layout,
  // naming its flag and the numbers involved. Each of its rules is checked here, once.
  virtual void check_plan(const PlannedRun& /*run*/) const {}
  // Its share of the model state per rank when bound to `axes` of `mesh`: memory estimates
  // multiply the shares of a plan's strategies.
  virtual ModelStateShare model_state_share(const MeshLayout& /*mesh*/,
                                            const std::vector<std::string>& /*axes*/) const {
    return {};
  }
};

}  // namespace meshtrain
