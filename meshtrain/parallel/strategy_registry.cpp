#include "meshtrain/parallel/strategy_registry.h"

#include "meshtrain/core/error.h"
#include "meshtrain/core/parse_integer.h"

namespace meshtrain {

std::string_view strategy_kind_name(StrategyKind kind) {
  switch (kind) {
    case StrategyKind::pipeline: return "pipeline";
    case StrategyKind::tensor: return "tensor";
    case StrategyKind::data: return "data";
  }
  return "unknown";
}

int parse_int_option(std::string_view plugin, std::string_view key, const std::string& value,
                     int minimum) {
  const std::optional<int> parsed = parse_integer<int>(value);
  MT_CHECK(parsed && *parsed >= minimum, plugin, " option ", key, " expects an integer of at least ",
           minimum, ", got '", value, "'");
  return *parsed;
}

bool parse_bool_option(std::string_view plugin, std::string_view key, const std::string& value) {
  MT_CHECK(value == "true" || value == "false", plugin, " option ", key,
           " expects true or false, got '", value, "'");
  return value == "true";
}

void StrategyRegistry::add(const std::string& name, StrategyFactory factory) {
  MT_CHECK(!name.empty(), "a strategy needs a name");
  MT_CHECK(factory != nullptr, "strategy '", name, "' registered without a factory");
  MT_CHECK(factories_.emplace(name, std::move(factory)).second, "strategy '", name,
           "' is already registered");
}

std::unique_ptr<Strategy> StrategyRegistry::create(const std::string& name,
                                                   const StrategyOptions& options) const {
  auto it = factories_.find(name);
  if (it == factories_.end()) {
    std::string known;
    for (const std::string& n : names()) known += (known.empty() ? "" : ", ") + n;
    throw InvalidArgument(detail::concat("unknown strategy '", name, "'; known strategies: ",
                                         known.empty() ? "(none)" : known));
  }
  return it->second(options);
}

std::vector<std::string> StrategyRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& [name, factory] : factories_) out.push_back(name);
  return out;
}

}  // namespace meshtrain
