#include "meshtrain/parallel/strategy_registry.h"

#include "meshtrain/core/error.h"

namespace meshtrain {

std::string_view strategy_kind_name(StrategyKind kind) {
  switch (kind) {
    case StrategyKind::pipeline: return "pipeline";
    case StrategyKind::tensor: return "tensor";
    case StrategyKind::data: return "data";
  }
  return "unknown";
}

void StrategyRegistry::add(PluginInfo plugin) {
  MT_CHECK(!plugin.name.empty(), "a strategy needs a name");
  MT_CHECK(plugin.factory != nullptr, "strategy '", plugin.name, "' registered without a factory");
  check_declarations(detail::concat("strategy '", plugin.name, "'"), plugin.name, plugin.options);
  const std::string name = plugin.name;
  MT_CHECK(plugins_.emplace(name, std::move(plugin)).second, "strategy '", name,
           "' is already registered");
}

const PluginInfo& StrategyRegistry::plugin(const std::string& name) const {
  const auto it = plugins_.find(name);
  if (it == plugins_.end())
    throw InvalidArgument(detail::concat("unknown strategy '", name, "'; known strategies: ",
                                         plugins_.empty() ? "(none)" : listed(names(), ", ")));
  return it->second;
}

std::unique_ptr<Strategy> StrategyRegistry::create(const std::string& name,
                                                   const TextOptions& options) const {
  const PluginInfo& info = plugin(name);
  return info.factory(OptionValues(name, info.options, options));
}

std::vector<std::string> StrategyRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& [name, plugin] : plugins_) out.push_back(name);
  return out;
}

}  // namespace meshtrain
