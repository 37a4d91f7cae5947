// The built-in parallelism plugins, by name, and which of them serves each mesh axis: what the
// trainer and the command line build a ParallelPlan from.
#pragma once

#include <string>
#include <string_view>

#include "meshtrain/parallel/strategy_registry.h"

namespace meshtrain {

// "fsdp" (plugins/fsdp), "tp" (plugins/tp) and "pp" (plugins/pp).
StrategyRegistry builtin_strategies();

// The plugin that serves a mesh axis: dp_replicate and dp_shard -> "fsdp", tp -> "tp",
// pp -> "pp".
std::string plugin_for_axis(std::string_view axis);

}  // namespace meshtrain
