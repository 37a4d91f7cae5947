// Command-line flags built from declared options (meshtrain/parallel/declared_options.h): the
// plugins' and the model families', so that the app knows none of them by name.
#pragma once

#include <functional>
#include <string>

#include <CLI/CLI.hpp>

#include "meshtrain/models/model_registry.h"

namespace meshtrain {

// The flag of `owner`'s `option`: its value passes through as text to `set`, to be checked and
// typed by the registry; --help shows the values it takes and its default.
void add_declared_flag(CLI::App* cmd, const std::string& owner, const OptionSpec& option,
                       const std::function<void(const std::string&)>& set);

// Every family's option flags (a flag that several families declare, such as --layers, once),
// collecting the values given by option name.
void add_model_flags(CLI::App* cmd, const ModelRegistry& models, TextOptions& given);

}  // namespace meshtrain
