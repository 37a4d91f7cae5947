#include "meshtrain/plugins/builtin_strategies.h"

#include "meshtrain/core/error.h"
#include "meshtrain/mesh/axis_names.h"
#include "meshtrain/plugins/fsdp/fsdp_strategy.h"
#include "meshtrain/plugins/pp/pp_strategy.h"
#include "meshtrain/plugins/tp/tp_strategy.h"

namespace meshtrain {

StrategyRegistry builtin_strategies() {
  StrategyRegistry registry;
  register_fsdp(registry);
  register_tp(registry);
  register_pp(registry);
  return registry;
}

std::string plugin_for_axis(std::string_view axis) {
  if (axis == mesh_axis::dp_replicate || axis == mesh_axis::dp_shard) return "fsdp";
  if (axis == mesh_axis::tp) return "tp";
  if (axis == mesh_axis::pp) return "pp";
  throw InvalidArgument(detail::concat("no plugin serves mesh axis '", axis, "'"));
}

std::vector<std::pair<std::string, std::vector<std::string>>> plugin_axes(
    const MeshLayout& mesh, const std::map<std::string, std::string>& axis_plugins) {
  std::vector<std::pair<std::string, std::vector<std::string>>> out;
  for (const MeshAxis& axis : mesh.axes()) {
    const auto bound = axis_plugins.find(axis.name);
    std::string plugin = bound != axis_plugins.end() ? bound->second : plugin_for_axis(axis.name);
    if (out.empty() || out.back().first != plugin) out.push_back({std::move(plugin), {}});
    out.back().second.push_back(axis.name);
  }
  return out;
}

}  // namespace meshtrain
