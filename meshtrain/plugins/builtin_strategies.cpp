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

}  // namespace meshtrain
