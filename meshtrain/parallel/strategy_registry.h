// StrategyRegistry: strategies by name, for the command line and configuration files. It is an
// ordinary object (no static registration): meshtrain/plugins/builtin_strategies.h fills one with
// the built-ins, and a program adds its own beside them.
//
// Plugins describe themselves: each declares its options (name, type, default, allowed values,
// help, command-line flag). The registry checks the options given as text against those
// declarations, with errors that name the plugin, the option, its flag and what was expected, and
// hands the plugin typed values; the command line builds its flags from the same declarations.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "meshtrain/parallel/declared_options.h"
#include "meshtrain/parallel/strategy.h"

namespace meshtrain {

using StrategyFactory = std::function<std::unique_ptr<Strategy>(const OptionValues&)>;

struct PluginInfo {
  std::string name;
  std::string help;  // one line: what the plugin is
  std::vector<OptionSpec> options;
  StrategyFactory factory;
};

class StrategyRegistry {
 public:
  // A duplicate name, a missing factory, or a malformed declaration (check_declarations) is
  // rejected.
  void add(PluginInfo plugin);
  // An unknown name is an error that lists the known ones; an unknown option or a value its
  // declaration refuses is an error naming the option, its flag and what was expected.
  std::unique_ptr<Strategy> create(const std::string& name, const TextOptions& options) const;
  std::vector<std::string> names() const;
  // The plugin registered under `name` (an unknown name is an error listing the known ones).
  const PluginInfo& plugin(const std::string& name) const;

 private:
  std::map<std::string, PluginInfo> plugins_;
};

}  // namespace meshtrain
