// The strategies a run's mesh calls for: each mesh axis goes to the plugin that serves it (the
// data axes together), created from the registry with the run's options for that plugin. The
// checks before any rank is built, the memory estimate and the trainer's plan all start here, so
// the trainer knows no concrete plugin.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "meshtrain/parallel/strategy.h"
#include "meshtrain/train/train_config.h"

namespace meshtrain {

struct BoundStrategy {
  std::string plugin;  // its registered name
  std::unique_ptr<Strategy> strategy;
  std::vector<std::string> axes;  // in mesh order
};

// In mesh order. InvalidArgument for options given to a plugin the mesh does not use, or refused
// by their plugin's declarations.
std::vector<BoundStrategy> bind_strategies(const TrainConfig& config);

// Every strategy's checks of the planned run: of the model (Strategy::check_model, on a model
// without tensors) and of the run (Strategy::check_plan).
void check_planned_run(const std::vector<BoundStrategy>& strategies, const TrainConfig& config);

// The share of the whole model's state one rank holds: the product of the strategies' shares,
// on the host when any keeps it there.
ModelStateShare model_state_share(const std::vector<BoundStrategy>& strategies,
                                  const MeshLayout& mesh);

}  // namespace meshtrain
