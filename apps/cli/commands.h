// The subcommands of the meshtrain command line; each registers itself on the app and runs from
// its callback. Errors surface as meshtrain::Error and end the program with a message.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace meshtrain {

// For the path of an output: an empty one (`--save ""`) would otherwise mean "no file" unsaid.
inline const CLI::Validator kNonEmptyPath(
    [](std::string& value) { return value.empty() ? "expected a path, got ''" : std::string(); },
    "PATH");

void add_train_command(CLI::App& app);
void add_prepare_command(CLI::App& app);
void add_info_command(CLI::App& app);
void add_schedule_command(CLI::App& app);
void add_convert_command(CLI::App& app);

}  // namespace meshtrain
