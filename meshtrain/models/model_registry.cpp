#include "meshtrain/models/model_registry.h"

#include <algorithm>

#include "meshtrain/core/error.h"

namespace meshtrain {

void ModelRegistry::add(ModelFamily family) {
  MT_CHECK(!family.name.empty(), "a model family needs a name");
  MT_CHECK(family.factory != nullptr, "model family '", family.name,
           "' registered without a factory");
  MT_CHECK(families_.count(family.name) == 0, "model family '", family.name,
           "' is already registered");
  const std::string what = detail::concat("model family '", family.name, "'");
  check_declarations(what, family.name, family.options);
  for (const auto& [preset, values] : family.presets) {
    MT_CHECK(!preset.empty(), what, ": a preset without a name");
    for (const auto& [other, registered] : families_)
      MT_CHECK(registered.presets.count(preset) == 0, what, ": preset '", preset,
               "' is already one of '", other, "'");
    OptionValues(family.name, family.options, values);  // its values are ones the family takes
  }
  const std::string name = family.name;
  families_.emplace(name, std::move(family));
}

const ModelFamily& ModelRegistry::family(const std::string& name) const {
  const auto it = families_.find(name);
  if (it == families_.end())
    throw InvalidArgument(detail::concat("unknown model family '", name, "'; known: ",
                                         families_.empty() ? "(none)" : listed(names(), ", ")));
  return it->second;
}

ModelSpecPtr ModelRegistry::create(const std::string& name, const TextOptions& options) const {
  const ModelFamily& f = family(name);
  const OptionValues values(f.name, f.options, options);
  for (const OptionSpec& option : f.options)
    if (option.default_value.empty() && !values.given(option.name))
      throw InvalidArgument(detail::concat("the ", f.name, " model needs ", option.name, " (",
                                           option_flag(f.name, option), "): ", option.help));
  ModelSpecPtr spec = f.factory(values);
  MT_CHECK(spec != nullptr && spec->family() == f.name, "model family '", f.name,
           "' made no model, or one of another family");
  return spec;
}

const ModelFamily& ModelRegistry::family_of_preset(const std::string& preset) const {
  for (const auto& [name, f] : families_)
    if (f.presets.count(preset)) return f;
  const std::vector<std::string> known = preset_names();
  throw InvalidArgument(detail::concat("unknown model preset '", preset, "'; known: ",
                                       known.empty() ? "(none)" : listed(known, ", ")));
}

ModelSpecPtr ModelRegistry::preset(const std::string& name, const TextOptions& overrides) const {
  const ModelFamily& f = family_of_preset(name);
  TextOptions values = overrides;
  values.insert(f.presets.at(name).begin(), f.presets.at(name).end());  // keeps the overrides
  return create(f.name, values);
}

ModelSpecPtr ModelRegistry::from_safetensors(const std::string& path,
                                             const TextOptions& given) const {
  std::vector<std::string> readers, matches;
  std::optional<TextOptions> read;
  for (const auto& [name, f] : families_) {
    if (!f.read_safetensors) continue;
    readers.push_back(name);
    if (std::optional<TextOptions> options = f.read_safetensors(path)) {
      matches.push_back(name);
      read = std::move(options);
    }
  }
  MT_CHECK(!matches.empty(), "'", path, "' holds no model of a family that reads safetensors "
           "files (", readers.empty() ? "none" : listed(readers, ", "), ")");
  MT_CHECK(matches.size() == 1, "'", path, "' reads as a model of several families (",
           listed(matches, " and "), ")");
  return agreeing(matches.front(), std::move(*read), given, "'" + path + "'");
}

ModelSpecPtr ModelRegistry::agreeing(const std::string& name, TextOptions held,
                                     const TextOptions& given, const std::string& source) const {
  const ModelFamily& f = family(name);
  for (const auto& [key, value] : given) {
    const auto it = held.find(key);
    if (it == held.end()) {
      held.emplace(key, value);
      continue;
    }
    const auto spec = std::find_if(f.options.begin(), f.options.end(),
                                   [&](const OptionSpec& o) { return o.name == key; });
    MT_CHECK(it->second == value, spec == f.options.end() ? key : option_flag(f.name, *spec), " ",
             value, " disagrees with ", source, ", which holds ", key, " ", it->second);
  }
  return create(f.name, held);
}

std::vector<std::string> ModelRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& [name, f] : families_) out.push_back(name);
  return out;
}

std::vector<std::string> ModelRegistry::preset_names() const {
  std::vector<std::string> out;
  for (const auto& [name, f] : families_)
    for (const auto& [preset, values] : f.presets) out.push_back(preset);
  return out;
}

}  // namespace meshtrain
