#include "meshtrain/parallel/declared_options.h"

#include <algorithm>
#include <optional>
#include <set>

#include "meshtrain/core/error.h"
#include "meshtrain/core/parse_integer.h"
#include "meshtrain/core/parse_real.h"

namespace meshtrain {

namespace {
const OptionSpec* find_option(const std::vector<OptionSpec>& specs, std::string_view name) {
  const auto it = std::find_if(specs.begin(), specs.end(),
                               [&](const OptionSpec& s) { return s.name == name; });
  return it == specs.end() ? nullptr : &*it;
}

// InvalidArgument unless `value` is one the declaration allows.
void check_value(std::string_view owner, const OptionSpec& spec, const std::string& value) {
  const auto refuse = [&](const auto&... expected) {
    throw InvalidArgument(detail::concat(owner, " option ", spec.name, " (",
                                         option_flag(owner, spec), ") expects ", expected...,
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
    case OptionSpec::Type::real: {
      const std::optional<double> parsed = parse_real(value);
      if (!parsed || *parsed < spec.minimum) refuse("a number of at least ", spec.minimum);
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

std::string listed(const std::vector<std::string>& items, std::string_view last_separator) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i)
    out += (i == 0 ? "" : i + 1 == items.size() ? std::string(last_separator) : ", ") + items[i];
  return out;
}

std::string option_flag(std::string_view owner, const OptionSpec& option) {
  if (!option.flag.empty()) return option.flag;
  std::string flag = detail::concat("--", owner, "-", option.name);
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

void check_declarations(std::string_view what, std::string_view owner,
                        const std::vector<OptionSpec>& specs) {
  std::set<std::string> seen;
  for (const OptionSpec& option : specs) {
    MT_CHECK(!option.name.empty() && seen.insert(option.name).second, what, " declares option '",
             option.name, "' twice or unnamed");
    MT_CHECK(option.type != OptionSpec::Type::choice || !option.choices.empty(), what,
             " declares the choice option '", option.name, "' without choices");
    MT_CHECK(!option.switch_flag || option.type == OptionSpec::Type::boolean, what,
             " declares the switch flag of '", option.name, "' on a non-boolean");
    if (!option.default_value.empty()) check_value(owner, option, option.default_value);
  }
}

OptionValues::OptionValues(std::string owner, const std::vector<OptionSpec>& specs,
                           const TextOptions& given)
    : owner_(std::move(owner)), specs_(&specs) {
  for (const auto& [key, value] : given) {
    const OptionSpec* spec = find_option(specs, key);
    if (spec == nullptr) {
      std::vector<std::string> known;
      for (const OptionSpec& s : specs) known.push_back(s.name);
      throw InvalidArgument(detail::concat("unknown ", owner_, " option '", key, "'; known: ",
                                           known.empty() ? "(none)" : listed(known, ", ")));
    }
    check_value(owner_, *spec, value);
    given_[key] = value;
  }
  values_ = given_;
  for (const OptionSpec& spec : specs)
    if (!spec.default_value.empty()) values_.emplace(spec.name, spec.default_value);
}

const std::string& OptionValues::value(std::string_view name, OptionSpec::Type type) const {
  const OptionSpec* spec = find_option(*specs_, name);
  MT_CHECK(spec != nullptr, owner_, " reads option '", name, "', which it does not declare");
  MT_CHECK(spec->type == type, owner_, " reads option '", name, "' as another type than declared");
  const auto it = values_.find(std::string(name));
  MT_CHECK(it != values_.end(), owner_, " reads option '", name,
           "', which was not given and has no default");
  return it->second;
}

bool OptionValues::boolean(std::string_view name) const {
  return value(name, OptionSpec::Type::boolean) == "true";
}

int OptionValues::integer(std::string_view name) const {
  return *parse_integer<int>(value(name, OptionSpec::Type::integer));  // checked on the way in
}

double OptionValues::real(std::string_view name) const {
  return *parse_real(value(name, OptionSpec::Type::real));  // checked on the way in
}

const std::string& OptionValues::text(std::string_view name) const {
  const OptionSpec* spec = find_option(*specs_, name);
  return value(name, spec && spec->type == OptionSpec::Type::choice ? OptionSpec::Type::choice
                                                                     : OptionSpec::Type::text);
}

}  // namespace meshtrain
