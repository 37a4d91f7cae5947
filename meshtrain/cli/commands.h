// The subcommands of the meshtrain command line (command_line.h); each registers itself on the app
// and runs from its callback, within the parse. Errors surface as meshtrain::Error and end the
// command with a message.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "meshtrain/cli/command_line.h"

namespace meshtrain {

// For the path of an output: an empty one (`--save ""`) would otherwise mean "no file" unsaid.
inline const CLI::Validator kNonEmptyPath(
    [](std::string& value) { return value.empty() ? "expected a path, got ''" : std::string(); },
    "PATH");

// `registries` outlives the parse.
void add_train_command(CLI::App& app, const Registries& registries);
void add_prepare_command(CLI::App& app);
void add_info_command(CLI::App& app, const Registries& registries);
void add_schedule_command(CLI::App& app);
void add_convert_command(CLI::App& app, const Registries& registries);

}  // namespace meshtrain
