#include "meshtrain/parallel/strategy_registry.h"

#include <algorithm>
#include <set>

#include "meshtrain/core/error.h"
#include "meshtrain/core/parse_integer.h"

namespace meshtrain {

namespace {
const OptionSpec* find_option(const std::vector<OptionSpec>& specs, std::string_view name) {
  const auto it = std::find_if(specs.begin(), specs.end(),
                               [&](const OptionSpec& s) { return s.name == name; });
  return it == specs.end() ? nullptr : &*it;
}

// "full, grad_op, none or hybrid"
std::string listed(const std::vector<std::string>& items, std::string_view last_separator) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i)
    out += (i == 0 ? "" : i + 1 == items.size() ? std::string(last_separator) : ", ") + items[i];
  return out;
}

// InvalidArgument unless `value` is one the declaration allows.
void check_value(std::string_view plugin, const OptionSpec& spec, const std::string& value) {
  const auto refuse = [&](const auto&... expected) {
    throw InvalidArgument(detail::concat(plugin, " option ", spec.name, " (",
                                         option_flag(plugin, spec), ") expects ", expected...,
                                         ", got '", value, "'"));
  };
  switch (spec.type) {
    case OptionSpec::Type::boolean:
      if (value != "true" && value != "false") refuse("true or false");
      return;
    case OptionSpec::Type::integer: {
      const std::optional<int> parsed = parse_integer<int>(value);
      if (!parsed || *parsed < spec.minimum) refuse("an integer of at least ", spec.minimum);
      return;
    }
    case OptionSpec::Type::choice:
      if (std::find(spec.choices.begin(), spec.choices.end(), value) == spec.choices.end())
        refuse(spec.choices.size() == 1 ? "" : "one of ", listed(spec.choices, " or "));
      return;
    case OptionSpec::Type::text:
      return;
  }
}
}  // namespace

std::string_view strategy_kind_name(StrategyKind kind) {
  switch (kind) {
    case StrategyKind::pipeline: return "pipeline";
    case StrategyKind::tensor: return "tensor";
    case StrategyKind::data: return "data";
  }
  return "unknown";
}

std::string option_flag(std::string_view plugin, const OptionSpec& option) {
  if (!option.flag.empty()) return option.flag;
  std::string flag = detail::concat("--", plugin, "-", option.name);
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

const std::string& OptionValues::value(std::string_view name, OptionSpec::Type type) const {
  const OptionSpec* spec = find_option(*specs_, name);
  MT_CHECK(spec != nullptr, plugin_, " reads option '", name, "', which it does not declare");
  MT_CHECK(spec->type == type, plugin_, " reads option '", name, "' as another type than declared");
  const auto it = values_.find(std::string(name));
  MT_CHECK(it != values_.end(), plugin_, " reads option '", name,
           "', which was not given and has no default");
  return it->second;
}

bool OptionValues::boolean(std::string_view name) const {
  return value(name, OptionSpec::Type::boolean) == "true";
}

int OptionValues::integer(std::string_view name) const {
  return *parse_integer<int>(value(name, OptionSpec::Type::integer));  // checked on the way in
}

const std::string& OptionValues::text(std::string_view name) const {
  const OptionSpec* spec = find_option(*specs_, name);
  return value(name, spec && spec->type == OptionSpec::Type::choice ? OptionSpec::Type::choice
                                                                     : OptionSpec::Type::text);
}

void StrategyRegistry::add(PluginInfo plugin) {
  MT_CHECK(!plugin.name.empty(), "a strategy needs a name");
  MT_CHECK(plugin.factory != nullptr, "strategy '", plugin.name, "' registered without a factory");
  std::set<std::string> seen;
  for (const OptionSpec& option : plugin.options) {
    MT_CHECK(!option.name.empty() && seen.insert(option.name).second, "strategy '", plugin.name,
             "' declares option '", option.name, "' twice or unnamed");
    MT_CHECK(option.type != OptionSpec::Type::choice || !option.choices.empty(), "strategy '",
             plugin.name, "' declares the choice option '", option.name, "' without choices");
    MT_CHECK(!option.switch_flag || option.type == OptionSpec::Type::boolean, "strategy '",
             plugin.name, "' declares the switch flag of '", option.name, "' on a non-boolean");
    if (!option.default_value.empty()) check_value(plugin.name, option, option.default_value);
  }
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
                                                   const StrategyOptions& options) const {
  const PluginInfo& info = plugin(name);
  OptionValues values;
  values.plugin_ = name;
  values.specs_ = &info.options;
  for (const auto& [key, value] : options) {
    const OptionSpec* spec = find_option(info.options, key);
    if (spec == nullptr) {
      std::vector<std::string> known;
      for (const OptionSpec& s : info.options) known.push_back(s.name);
      throw InvalidArgument(detail::concat("unknown ", name, " option '", key, "'; known: ",
                                           known.empty() ? "(none)" : listed(known, ", ")));
    }
    check_value(name, *spec, value);
    values.given_[key] = value;
  }
  values.values_ = values.given_;
  for (const OptionSpec& spec : info.options)
    if (!spec.default_value.empty()) values.values_.emplace(spec.name, spec.default_value);
  return info.factory(values);
}

std::vector<std::string> StrategyRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& [name, plugin] : plugins_) out.push_back(name);
  return out;
}

}  // namespace meshtrain
