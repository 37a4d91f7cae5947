#include "meshtrain/train/bound_strategies.h"

#include <algorithm>

#include "meshtrain/core/error.h"
#include "meshtrain/mesh/axis_names.h"
#include "meshtrain/plugins/builtin_strategies.h"

namespace meshtrain {

std::vector<BoundStrategy> bind_strategies(const TrainConfig& config) {
  const MeshLayout mesh = config.effective_mesh();
  for (const auto& [axis, plugin] : config.axis_plugins)
    MT_CHECK(mesh.has_axis(axis), "plugin '", plugin, "' is bound to axis '", axis,
             "', which the mesh ", mesh.to_string(), " does not have");
  const auto bindings = plugin_axes(mesh, config.axis_plugins);
  MT_CHECK(config.plugins != nullptr, "TrainConfig: no plugin registry");
  const StrategyRegistry& registry = *config.plugins;
  // The options first, so that a misspelt one is named as such whatever the mesh.
  for (const auto& [plugin, options] : config.strategies) {
    registry.create(plugin, options);
    MT_CHECK(std::any_of(bindings.begin(), bindings.end(),
                         [&](const auto& b) { return b.first == plugin; }),
             "options are given for the '", plugin, "' plugin, but the mesh ", mesh.to_string(),
             " has no axis it serves");
  }
  std::vector<BoundStrategy> out;
  for (const auto& [plugin, axes] : bindings) {
    const auto options = config.strategies.find(plugin);
    out.push_back({plugin,
                   registry.create(plugin, options == config.strategies.end()
                                               ? TextOptions{}
                                               : options->second),
                   axes});
  }
  return out;
}

void check_planned_run(const std::vector<BoundStrategy>& strategies, const TrainConfig& config) {
  const MeshLayout mesh = config.effective_mesh();
  const std::unique_ptr<Model> model = config.model->build(Device::cpu());  // no tensors
  for (const BoundStrategy& bound : strategies)
    bound.strategy->check_model(*model, mesh, bound.axes);
  const int64_t dp = mesh.span_size(mesh_axis::dp);
  for (const BoundStrategy& bound : strategies)
    bound.strategy->check_plan(PlannedRun{
        .mesh = mesh,
        .axes = bound.axes,
        .micro_batch_tokens = config.batch / dp / config.grad_accum * config.seq,
        .micro_batch_tokens_origin = "--batch / data-parallel degree / --grad-accum x --seq"});
}

ModelStateShare model_state_share(const std::vector<BoundStrategy>& strategies,
                                  const MeshLayout& mesh) {
  ModelStateShare share;
  for (const BoundStrategy& bound : strategies) {
    const ModelStateShare mine = bound.strategy->model_state_share(mesh, bound.axes);
    share.fraction *= mine.fraction;
    share.on_host = share.on_host || mine.on_host;
  }
  return share;
}

}  // namespace meshtrain
