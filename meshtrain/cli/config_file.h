// `meshtrain train --config FILE`: the train command's settings as a TOML file in sections, each
// key standing for one flag. The fixed sections' keys are listed here; [model] also takes the
// model families' declared options and each plugin has a section of its declared options, so the
// file and the flags are built from the same declarations. Flags given on the command line
// override the file. `--print-config` writes a run's effective configuration in the same layout.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "meshtrain/models/model_registry.h"
#include "meshtrain/parallel/strategy_registry.h"
#include "meshtrain/train/train_config.h"

namespace meshtrain {

// One key of the file: [section] key = value stands for `flag value`.
struct ConfigKey {
  enum class Type { integer, real, boolean, text, switch_flag };
  std::string section, key, flag;
  Type type;
};

// Every key the train command's file takes.
std::vector<ConfigKey> train_config_keys(const ModelRegistry& models,
                                         const StrategyRegistry& plugins);

// Gives every flag of `command` that the file at `path` sets and the command line did not, as if
// it were given: an unreadable file, an unknown section or key, or a value of the wrong type is an
// InvalidArgument naming the file, the line and the key; a switch set to false is left unset.
void apply_config_file(CLI::App& command, const std::string& path,
                       const std::vector<ConfigKey>& keys);

// The configuration of the run `config` as a file that reproduces it: the model's family and
// options, the bound plugins' options (given or default), the effective mesh.
std::string effective_config(const TrainConfig& config, const ModelRegistry& models);

}  // namespace meshtrain
