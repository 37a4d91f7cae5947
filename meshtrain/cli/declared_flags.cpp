#include "meshtrain/cli/declared_flags.h"

#include <set>

namespace meshtrain {

void add_declared_flag(CLI::App* cmd, const std::string& owner, const OptionSpec& option,
                       const std::function<void(const std::string&)>& set) {
  if (option.switch_flag) {
    cmd->add_flag_function(
        option_flag(owner, option), [set](int64_t) { set("true"); }, option.help);
    return;
  }
  std::string values;  // what the value may be, where --help shows the type
  switch (option.type) {
    case OptionSpec::Type::boolean: values = "true|false"; break;
    case OptionSpec::Type::integer: values = "INT"; break;
    case OptionSpec::Type::real: values = "NUM"; break;
    case OptionSpec::Type::text: values = "TEXT"; break;
    case OptionSpec::Type::choice:
      for (const std::string& choice : option.choices) values += (values.empty() ? "" : "|") + choice;
      break;
  }
  const std::string help = option.default_value.empty()
                               ? option.help
                               : option.help + " (default " + option.default_value + ")";
  cmd->add_option_function<std::string>(option_flag(owner, option), set, help)
      ->type_name(values);
}

void add_model_flags(CLI::App* cmd, const ModelRegistry& models, TextOptions& given) {
  std::set<std::string> added;
  for (const std::string& family : models.names())
    for (const OptionSpec& option : models.family(family).options)
      if (added.insert(option_flag(family, option)).second)
        add_declared_flag(cmd, family, option,
                          [&given, name = option.name](const std::string& v) { given[name] = v; });
}

}  // namespace meshtrain
