// The meshtrain command line as a library: `train`, `prepare`, `info`, `schedule` and `convert`.
// The meshtrain binary runs it with the built-in model families and strategy plugins; a program
// that registers families or plugins of its own runs it with its registries, and reaches them by
// name like the built-ins: presets and --family, --axis-plugins, each plugin's flags and its
// section of a --config file (examples/custom_strategy.cpp).
#pragma once

#include "meshtrain/models/model_registry.h"
#include "meshtrain/parallel/strategy_registry.h"

namespace meshtrain {

// What a command line can name.
struct Registries {
  ModelRegistry models;
  StrategyRegistry plugins;
};

// builtin_models() and builtin_strategies().
Registries builtin_registries();

// Parses `argv` (argv[0] the program's name) and runs its command: 0 when it succeeded; 1 after
// an error, printed to stderr as "meshtrain: error: ..."; CLI11's code after --help (0) or a flag
// it refused (printed with the usage).
int run_command_line(int argc, const char* const* argv, const Registries& registries);

}  // namespace meshtrain
