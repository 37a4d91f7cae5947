// StrategyRegistry: strategies by name, for the command line and configuration files. It is an
// ordinary object (no static registration): meshtrain/plugins/register.h fills one with the built-ins.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "meshtrain/parallel/strategy.h"

namespace meshtrain {

using StrategyOptions = std::map<std::string, std::string>;
using StrategyFactory = std::function<std::unique_ptr<Strategy>(const StrategyOptions&)>;

// Option values as plugins read them; errors name the plugin, the option and what was expected.
int parse_int_option(std::string_view plugin, std::string_view key, const std::string& value,
                     int minimum);
bool parse_bool_option(std::string_view plugin, std::string_view key, const std::string& value);

class StrategyRegistry {
 public:
  // A duplicate name is rejected.
  void add(const std::string& name, StrategyFactory factory);
  // An unknown name is an error that lists the known ones.
  std::unique_ptr<Strategy> create(const std::string& name, const StrategyOptions& options) const;
  std::vector<std::string> names() const;

 private:
  std::map<std::string, StrategyFactory> factories_;
};

}  // namespace meshtrain
