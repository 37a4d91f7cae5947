// The subcommands of the meshtrain command line (command_line.h); each registers itself on the app
// and runs from its callback, within the parse. Errors surface as meshtrain::Error and end the
// command with a message.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "meshtrain/cli/command_line.h"
#include "meshtrain/core/parse_integer.h"

namespace meshtrain {

// For the path of an output: an empty one (`--save ""`) would otherwise mean "no file" unsaid.
inline const CLI::Validator kNonEmptyPath(
    [](std::string& value) { return value.empty() ? "expected a path, got ''" : std::string(); },
    "PATH");

// For counts: --threads 0 would otherwise read as "not given", --sample -5 as a huge count.
inline const CLI::Validator kPositiveInteger(
    [](std::string& value) {
      const std::optional<int64_t> parsed = parse_integer<int64_t>(value);
      return parsed && *parsed > 0 ? std::string() : "expected a positive integer, got " + value;
    },
    "POSITIVE");
inline const CLI::Validator kNonNegativeInteger(
    [](std::string& value) {
      return parse_integer<uint64_t>(value) ? std::string()
                                            : "expected a non-negative integer, got " + value;
    },
    "NON-NEGATIVE");

// `registries` outlives the parse.
void add_train_command(CLI::App& app, const Registries& registries);
void add_prepare_command(CLI::App& app);
void add_info_command(CLI::App& app, const Registries& registries);
void add_schedule_command(CLI::App& app);
void add_plan_command(CLI::App& app, const Registries& registries);
void add_sweep_command(CLI::App& app, const Registries& registries);
void add_convert_command(CLI::App& app, const Registries& registries);
void add_generate_command(CLI::App& app, const Registries& registries);
void add_report_command(CLI::App& app);

}  // namespace meshtrain
