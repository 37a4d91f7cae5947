// The built-in parallelism plugins, by name, and which of them serves each mesh axis: what the
// trainer and the command line build a ParallelPlan from.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "meshtrain/mesh/mesh_layout.h"
#include "meshtrain/parallel/strategy_registry.h"

namespace meshtrain {

// "fsdp" (plugins/fsdp), "tp" (plugins/tp) and "pp" (plugins/pp).
StrategyRegistry builtin_strategies();

// The plugin that serves a mesh axis: dp_replicate and dp_shard -> "fsdp", tp -> "tp",
// pp -> "pp".
std::string plugin_for_axis(std::string_view axis);

// Each plugin that serves `mesh`, with its axes, in mesh order: an axis goes to the plugin
// `axis_plugins` binds it to, else to plugin_for_axis's; neighbouring axes of one plugin are
// served together (the data axes by one "fsdp").
std::vector<std::pair<std::string, std::vector<std::string>>> plugin_axes(
    const MeshLayout& mesh, const std::map<std::string, std::string>& axis_plugins = {});

}  // namespace meshtrain
