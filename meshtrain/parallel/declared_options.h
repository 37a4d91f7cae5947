// Declared options: what a plugin or a model family can be configured with (name, type, default,
// allowed values, help, command-line flag), and the checked, typed values it receives. The
// strategy registry and the model registry read options the same way, so the command line builds
// its flags and a configuration file its sections from the same declarations.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace meshtrain {

// Options as given: option name -> value as text ("prefetch" -> "2").
using TextOptions = std::map<std::string, std::string>;

struct OptionSpec {
  enum class Type {
    boolean,  // true or false
    integer,  // at least `minimum`
    real,     // a finite decimal number of at least `minimum` (1e-5, 500000)
    choice,   // one of `choices`
    text,     // checked by its owner (a list such as "3,2,2,3")
  };
  std::string name;
  Type type = Type::text;
  std::string help;
  // The value when the option is not given, as text; empty: none (the owner decides, and its
  // help says how).
  std::string default_value{};
  std::vector<std::string> choices{};
  int minimum = 0;
  // The command-line flag; empty: --<owner>-<name> with '_' written '-'.
  std::string flag{};
  // A boolean whose flag alone switches it on (--offload), rather than taking true or false.
  bool switch_flag = false;
};

// The flag of `option` of `owner` (a plugin or a model family) on the command line.
std::string option_flag(std::string_view owner, const OptionSpec& option);

// The options an owner receives: checked against its declarations, defaults filled in.
class OptionValues {
 public:
  // InvalidArgument for an unknown option or a value its declaration refuses, naming the owner,
  // the option, its flag and what was expected.
  OptionValues(std::string owner, const std::vector<OptionSpec>& specs, const TextOptions& given);

  bool given(std::string_view name) const { return given_.count(std::string(name)) > 0; }
  // The value of a declared option of that type (given, else its default). Asking for an
  // undeclared option, one of another type, or one with no value is a bug in the owner.
  bool boolean(std::string_view name) const;
  int integer(std::string_view name) const;
  double real(std::string_view name) const;
  const std::string& text(std::string_view name) const;  // choice and text options

 private:
  const std::string& value(std::string_view name, OptionSpec::Type type) const;

  std::string owner_;
  const std::vector<OptionSpec>* specs_;  // the owner's declarations, which outlive the values
  TextOptions values_;                    // given, and the defaults of the others
  TextOptions given_;
};

// InvalidArgument for a malformed declaration (two options of one name, a choice without choices,
// a switch that is no boolean, a default its own check refuses); `what` names the owner
// ("strategy 'fsdp'").
void check_declarations(std::string_view what, std::string_view owner,
                        const std::vector<OptionSpec>& specs);

// "full, grad_op, none or hybrid"
std::string listed(const std::vector<std::string>& items, std::string_view last_separator);

}  // namespace meshtrain
