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

#include "meshtrain/parallel/strategy.h"

namespace meshtrain {

// Options as given: option name -> value as text ("prefetch" -> "2").
using StrategyOptions = std::map<std::string, std::string>;

struct OptionSpec {
  enum class Type {
    boolean,  // true or false
    integer,  // at least `minimum`
    choice,   // one of `choices`
    text,     // checked by the plugin (a list such as "3,2,2,3")
  };
  std::string name;
  Type type = Type::text;
  std::string help;
  // The value when the option is not given, as text; empty: none (the plugin decides, and its
  // help says how).
  std::string default_value{};
  std::vector<std::string> choices{};
  int minimum = 0;
  // The command-line flag; empty: --<plugin>-<name> with '_' written '-'.
  std::string flag{};
  // A boolean whose flag alone switches it on (--offload), rather than taking true or false.
  bool switch_flag = false;
};

// The flag of `option` of `plugin` on the command line.
std::string option_flag(std::string_view plugin, const OptionSpec& option);

// The options a plugin's factory receives: checked against its declarations, defaults filled in.
class OptionValues {
 public:
  bool given(std::string_view name) const { return given_.count(std::string(name)) > 0; }
  // The value of a declared option of that type (given, else its default). Asking for an
  // undeclared option, one of another type, or one with no value is a bug in the plugin.
  bool boolean(std::string_view name) const;
  int integer(std::string_view name) const;
  const std::string& text(std::string_view name) const;  // choice and text options

 private:
  friend class StrategyRegistry;
  const std::string& value(std::string_view name, OptionSpec::Type type) const;

  std::string plugin_;
  const std::vector<OptionSpec>* specs_ = nullptr;
  StrategyOptions values_;  // given, and the defaults of the others
  StrategyOptions given_;
};

using StrategyFactory = std::function<std::unique_ptr<Strategy>(const OptionValues&)>;

struct PluginInfo {
  std::string name;
  std::string help;  // one line: what the plugin is
  std::vector<OptionSpec> options;
  StrategyFactory factory;
};

class StrategyRegistry {
 public:
  // A duplicate name, a missing factory, or a malformed declaration (two options of one name, a
  // choice without choices, a default its own check refuses) is rejected.
  void add(PluginInfo plugin);
  // An unknown name is an error that lists the known ones; an unknown option or a value its
  // declaration refuses is an error naming the option, its flag and what was expected.
  std::unique_ptr<Strategy> create(const std::string& name, const StrategyOptions& options) const;
  std::vector<std::string> names() const;
  // The plugin registered under `name` (an unknown name is an error listing the known ones).
  const PluginInfo& plugin(const std::string& name) const;

 private:
  std::map<std::string, PluginInfo> plugins_;
};

}  // namespace meshtrain
