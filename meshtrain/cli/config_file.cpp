#include "meshtrain/cli/config_file.h"

#include <charconv>
#include <cstdio>
#include <functional>
#include <optional>
#include <variant>

#include <toml++/toml.h>

#include "meshtrain/core/error.h"
#include "meshtrain/core/parse_integer.h"
#include "meshtrain/core/parse_real.h"
#include "meshtrain/mesh/axis_names.h"
#include "meshtrain/train/bound_strategies.h"

namespace meshtrain {

namespace {

using Type = ConfigKey::Type;
using Value = std::variant<int64_t, double, bool, std::string>;
using Getter = std::function<std::optional<Value>(const TrainConfig&)>;

std::optional<Value> unless_empty(const std::string& text) {
  return text.empty() ? std::nullopt : std::optional<Value>(text);
}

struct FixedKey {
  ConfigKey key;
  Getter value;  // its value in a run's configuration (nullopt: not set)
};

// The keys of the fixed sections, and where a run's configuration keeps each.
const std::vector<FixedKey>& fixed_keys() {
  static const std::vector<FixedKey> keys = {
      {{"model", "preset", "--model", Type::text}, [](auto&) { return std::nullopt; }},
      {{"model", "family", "--family", Type::text},
       [](const TrainConfig& c) -> std::optional<Value> { return c.model->family(); }},
      {{"model", "init", "--init", Type::text}, [](auto& c) { return unless_empty(c.init_path); }},
      {{"data", "path", "--data", Type::text}, [](auto& c) { return unless_empty(c.data_path); }},
      {{"validation", "data", "--val-data", Type::text},
       [](auto& c) { return unless_empty(c.val_data_path); }},
      {{"validation", "every", "--val-every", Type::integer},
       [](auto& c) { return Value(c.val_every); }},
      {{"validation", "batches", "--val-batches", Type::integer},
       [](auto& c) { return Value(c.val_batches); }},
      {{"training", "steps", "--steps", Type::integer}, [](auto& c) { return Value(c.steps); }},
      {{"training", "batch", "--batch", Type::integer}, [](auto& c) { return Value(c.batch); }},
      {{"training", "seq", "--seq", Type::integer}, [](auto& c) { return Value(c.seq); }},
      {{"training", "grad_accum", "--grad-accum", Type::integer},
       [](auto& c) { return Value(c.grad_accum); }},
      {{"training", "ac", "--ac", Type::text},
       [](auto& c) { return Value(std::string(ac_mode_name(c.ac.mode))); }},
      {{"training", "ac_every", "--ac-every", Type::integer},
       [](auto& c) { return Value(static_cast<int64_t>(c.ac.every)); }},
      {{"training", "lr", "--lr", Type::real},
       [](auto& c) { return Value(static_cast<double>(c.lr.lr)); }},
      {{"training", "warmup", "--warmup", Type::integer},
       [](auto& c) { return Value(c.lr.warmup_steps); }},
      {{"training", "decay_steps", "--decay-steps", Type::integer},
       [](auto& c) { return Value(c.lr.decay_steps); }},
      {{"training", "min_lr", "--min-lr", Type::real},
       [](auto& c) { return Value(static_cast<double>(c.lr.min_lr)); }},
      {{"training", "weight_decay", "--wd", Type::real},
       [](auto& c) { return Value(static_cast<double>(c.weight_decay)); }},
      {{"training", "clip", "--clip", Type::real},
       [](auto& c) { return Value(static_cast<double>(c.clip)); }},
      {{"training", "seed", "--seed", Type::integer},
       [](auto& c) { return Value(static_cast<int64_t>(c.seed)); }},
      {{"mesh", "layout", "--mesh", Type::text},
       [](auto& c) { return Value(c.effective_mesh().to_string()); }},
      {{"mesh", "axis_plugins", "--axis-plugins", Type::text},
       [](const TrainConfig& c) {
         std::string bound;
         for (const auto& [axis, plugin] : c.axis_plugins)
           bound += (bound.empty() ? "" : ",") + axis + "=" + plugin;
         return unless_empty(bound);
       }},
      {{"mesh", "world", "--world", Type::integer},
       [](auto& c) { return Value(static_cast<int64_t>(c.world)); }},
      {{"mesh", "backend", "--backend", Type::text},
       [](auto& c) { return Value(std::string(backend_name(c.backend))); }},
      {{"mesh", "device", "--device", Type::text},
       [](auto& c) { return Value(std::string(c.device == DeviceKind::cuda ? "cuda" : "cpu")); }},
      {{"mesh", "threads", "--threads", Type::integer},
       [](auto& c) {
         return c.threads > 0 ? std::optional<Value>(static_cast<int64_t>(c.threads)) : std::nullopt;
       }},
      {{"mesh", "timeout", "--timeout", Type::integer}, [](auto& c) { return Value(c.timeout_s); }},
      {{"checkpoint", "dir", "--checkpoint-dir", Type::text},
       [](auto& c) { return unless_empty(c.checkpoint_dir); }},
      {{"checkpoint", "every", "--checkpoint-every", Type::integer},
       [](auto& c) { return Value(c.checkpoint_every); }},
      {{"checkpoint", "keep", "--keep", Type::integer}, [](auto& c) { return Value(c.keep); }},
      {{"checkpoint", "resume", "--resume", Type::text},
       [](auto& c) { return unless_empty(c.resume_dir); }},
      {{"output", "save", "--save", Type::text}, [](auto& c) { return unless_empty(c.save_path); }},
      {{"output", "metrics", "--metrics", Type::text},
       [](auto& c) { return unless_empty(c.metrics_path); }},
      {{"output", "report", "--report", Type::text},
       [](auto& c) { return unless_empty(c.report_dir); }},
      {{"output", "trace", "--trace", Type::text},
       [](auto& c) { return unless_empty(c.trace_dir); }},
      {{"output", "profile", "--profile", Type::switch_flag},
       [](auto& c) { return Value(c.profile); }},
      {{"output", "sample", "--sample", Type::integer},
       [](auto& c) { return Value(c.sample_bytes); }},
      {{"output", "log_every", "--log-every", Type::integer},
       [](auto& c) { return Value(c.log_every); }},
      {{"output", "quiet", "--quiet", Type::switch_flag}, [](auto& c) { return Value(c.quiet); }},
  };
  return keys;
}

Type declared_type(const OptionSpec& option) {
  if (option.switch_flag) return Type::switch_flag;
  switch (option.type) {
    case OptionSpec::Type::boolean: return Type::boolean;
    case OptionSpec::Type::integer: return Type::integer;
    case OptionSpec::Type::real: return Type::real;
    default: return Type::text;
  }
}

// A declared option's value (text, as the registries take it) as a TOML value of its type; text
// they refuse is an InvalidArgument. Not std::stod: it throws std::out_of_range for a subnormal
// (rms_norm_eps = 1e-310), which the registry takes.
Value typed(const OptionSpec& option, const std::string& text) {
  const auto refuse = [&](const char* expected) {
    return InvalidArgument(
        detail::concat("option ", option.name, " expects ", expected, ", got '", text, "'"));
  };
  switch (declared_type(option)) {
    case Type::boolean:
    case Type::switch_flag: return text == "true";
    case Type::integer: {
      const std::optional<int64_t> value = parse_integer<int64_t>(text);
      if (!value) throw refuse("an integer");
      return *value;
    }
    case Type::real: {
      const std::optional<double> value = parse_real(text);
      if (!value) throw refuse("a number");
      return *value;
    }
    default: return text;
  }
}

std::string_view type_name(Type type) {
  switch (type) {
    case Type::integer: return "an integer";
    case Type::real: return "a number";
    case Type::boolean:
    case Type::switch_flag: return "true or false";
    case Type::text: return "a string";
  }
  return "";
}

// The value of `node` as the flag's text, or nullopt when its type is not the key's.
std::optional<std::string> flag_text(const toml::node& node, Type type) {
  switch (type) {
    case Type::integer:
      if (node.is_integer()) return std::to_string(*node.value<int64_t>());
      return std::nullopt;
    case Type::real: {
      if (!node.is_number()) return std::nullopt;
      char text[32];
      const auto end = std::to_chars(text, text + sizeof text, *node.value<double>()).ptr;
      return std::string(text, end);
    }
    case Type::boolean:
    case Type::switch_flag:
      if (node.is_boolean()) return *node.value<bool>() ? "true" : "false";
      return std::nullopt;
    case Type::text:
      if (node.is_string()) return *node.value<std::string>();
      return std::nullopt;
  }
  return std::nullopt;
}

// A value as TOML writes it: reals (the run's floats) in the fewest digits that read back as the
// same float (0.0003, not 0.0003000000142492354), so that a file reproduces the run bit for bit,
// with a point as TOML floats need; strings quoted and escaped.
std::string toml_text(const Value& value) {
  if (const auto* i = std::get_if<int64_t>(&value)) return std::to_string(*i);
  if (const auto* b = std::get_if<bool>(&value)) return *b ? "true" : "false";
  if (const auto* d = std::get_if<double>(&value)) {
    const auto shortest = [](auto real) {
      char text[64];
      const auto fixed = std::to_chars(text, text + sizeof text, real, std::chars_format::fixed);
      if (fixed.ec == std::errc() && fixed.ptr - text <= 12) return std::string(text, fixed.ptr);
      return std::string(text, std::to_chars(text, text + sizeof text, real).ptr);
    };
    // A double that no float equals (a model's rms_norm_eps = 1e-50) in a double's digits: as a
    // float it would read back as another value (0).
    const float f = static_cast<float>(*d);
    std::string out = static_cast<double>(f) == *d ? shortest(f) : shortest(*d);
    if (out.find_first_of(".en") == std::string::npos) out += ".0";  // n: inf and nan
    return out;
  }
  std::string out = "\"";
  for (const char c : std::get<std::string>(value)) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", c);
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "\"";
}


}  // namespace

std::vector<ConfigKey> train_config_keys(const ModelRegistry& models,
                                         const StrategyRegistry& plugins) {
  std::vector<ConfigKey> keys;
  for (const FixedKey& fixed : fixed_keys()) keys.push_back(fixed.key);
  const auto known = [&](const std::string& section, const std::string& key) {
    for (const ConfigKey& k : keys)
      if (k.section == section && k.key == key) return true;
    return false;
  };
  for (const std::string& family : models.names())
    for (const OptionSpec& option : models.family(family).options)
      if (!known("model", option.name))
        keys.push_back({"model", option.name, option_flag(family, option), declared_type(option)});
  for (const std::string& plugin : plugins.names())
    for (const OptionSpec& option : plugins.plugin(plugin).options)
      keys.push_back({plugin, option.name, option_flag(plugin, option), declared_type(option)});
  return keys;
}

void apply_config_file(CLI::App& command, const std::string& path,
                       const std::vector<ConfigKey>& keys) {
  toml::table file;
  try {
    file = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    throw InvalidArgument(detail::concat("--config '", path, "' line ", e.source().begin.line,
                                         ": ", e.description()));
  }
  const auto at = [&](const toml::node& node) {
    return detail::concat("--config '", path, "' line ", node.source().begin.line, ": ");
  };
  std::vector<std::string> sections;
  for (const ConfigKey& k : keys)  // in the order of the keys, each once
    if (std::find(sections.begin(), sections.end(), k.section) == sections.end())
      sections.push_back(k.section);
  for (const auto& [section_name, section] : file) {
    const std::string name(section_name.str());
    std::vector<std::string> keys_here;
    for (const ConfigKey& k : keys)
      if (k.section == name) keys_here.push_back(k.key);
    if (keys_here.empty())
      throw InvalidArgument(detail::concat(at(section), "unknown section [", name, "]; known: ",
                                           listed(sections, ", ")));
    if (!section.is_table())
      throw InvalidArgument(detail::concat(at(section), "'", name, "' must be a section ([",
                                           name, "])"));
    for (const auto& [key_name, node] : *section.as_table()) {
      const std::string key(key_name.str());
      const auto spec = std::find_if(keys.begin(), keys.end(), [&](const ConfigKey& k) {
        return k.section == name && k.key == key;
      });
      if (spec == keys.end())
        throw InvalidArgument(detail::concat(at(node), "unknown key '", key, "' in [", name,
                                             "]; known: ", listed(keys_here, ", ")));
      const std::optional<std::string> text = flag_text(node, spec->type);
      if (!text)
        throw InvalidArgument(detail::concat(at(node), "[", name, "] ", key, " (", spec->flag,
                                             ") must be ", type_name(spec->type)));
      CLI::Option* option = command.get_option(spec->flag);
      if (option->count() > 0) continue;  // the command line's value wins
      if (spec->type == Type::switch_flag) {
        if (*text == "false") continue;  // unset is off
        option->add_result("1");
      } else {
        option->add_result(*text);
      }
      try {
        option->run_callback();
      } catch (const CLI::Error& e) {  // the flag's own check refused the value
        throw InvalidArgument(detail::concat(at(node), "[", name, "] ", key, ": ", e.what()));
      }
    }
  }
}

std::string effective_config(const TrainConfig& config, const ModelRegistry& models) {
  // Sections in the order they are first written, keys in declaration order.
  std::vector<std::pair<std::string, std::vector<std::pair<std::string, std::string>>>> file;
  const auto put = [&](const std::string& section, const std::string& key, const Value& value) {
    if (file.empty() || file.back().first != section) file.push_back({section, {}});
    file.back().second.emplace_back(key, toml_text(value));
  };
  std::vector<const FixedKey*> model_keys, other_keys;
  for (const FixedKey& fixed : fixed_keys())
    (fixed.key.section == "model" ? model_keys : other_keys).push_back(&fixed);
  const auto put_fixed = [&](const FixedKey* fixed) {
    if (const std::optional<Value> value = fixed->value(config))
      put(fixed->key.section, fixed->key.key, *value);
  };
  for (const FixedKey* fixed : model_keys) put_fixed(fixed);
  const ModelFamily& family = models.family(config.model->family());
  const TextOptions model_options = config.model->options();
  for (const OptionSpec& option : family.options)
    if (const auto it = model_options.find(option.name); it != model_options.end())
      put("model", option.name, typed(option, it->second));
  for (const FixedKey* fixed : other_keys) put_fixed(fixed);
  // The bound plugins' options, given or default: the run does not depend on today's defaults.
  for (const BoundStrategy& bound : bind_strategies(config)) {
    const PluginInfo& plugin = config.plugins->plugin(bound.plugin);
    const auto given = config.strategies.find(plugin.name);
    for (const OptionSpec& option : plugin.options) {
      std::string text = option.default_value;
      if (given != config.strategies.end() && given->second.count(option.name))
        text = given->second.at(option.name);
      if (!text.empty()) put(plugin.name, option.name, typed(option, text));
    }
  }
  std::string out = "# meshtrain train --config: " + config.model->describe() + "\n";
  for (const auto& [section, keys] : file) {
    out += "\n[" + section + "]\n";
    for (const auto& [key, value] : keys) out += key + " = " + value + "\n";
  }
  return out;
}

}  // namespace meshtrain
