// PpStrategy: pipeline parallelism on the `pp` axis, registered as "pp". Applied first (pipeline,
// then tensor, then data, as torchtitan): it narrows the model to this rank's stages
// (stage_model.h), marks the copies of parameters tied across pp ranks, and replaces the step
// runner with the PipelineRunner that executes the schedule. TP and FSDP then apply to the
// stage's layers and units as they would to a whole model.
//
//   plan.add(std::make_unique<PpStrategy>(PpOptions{.schedule = ScheduleKind::interleaved,
//                                                   .virtual_stages = 2}), {"pp"});
#pragma once

#include <memory>
#include <vector>

#include "meshtrain/parallel/strategy.h"
#include "meshtrain/parallel/strategy_registry.h"
#include "meshtrain/plugins/pp/schedule_generators.h"
#include "meshtrain/plugins/pp/stage_model.h"

namespace meshtrain {

struct PpOptions {
  // Every member has an initializer, so that designated initializers ({.mode = ...}) that
  // leave some out compile without -Wmissing-field-initializers warnings in users' builds.
  ScheduleKind schedule = ScheduleKind::one_f_one_b;
  int virtual_stages = 1;             // stages per rank (interleaved schedules)
  std::vector<int> layers_per_stage{};  // empty: balanced by layer count
};

class PpStrategy : public Strategy {
 public:
  explicit PpStrategy(PpOptions options = {});
  std::string name() const override { return "pp"; }
  StrategyKind kind() const override { return StrategyKind::pipeline; }
  // Axes: exactly {"pp"}.
  void apply(ParallelContext& ctx, const std::vector<std::string>& axes) override;
  ModelStateShare model_state_share(const MeshLayout& mesh,
                                    const std::vector<std::string>& axes) const override;
  const PpOptions& options() const { return options_; }

 private:
  PpOptions options_;
  std::unique_ptr<StageModel> stage_model_;
};

// "pp", its options declared with their flags: schedule (gpipe, 1f1b, interleaved, zb-h1),
// virtual (stages per rank; 2 by default for interleaved, else 1) and layers ("3,2,2,3").
void register_pp(StrategyRegistry& registry);

}  // namespace meshtrain
