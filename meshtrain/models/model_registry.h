// ModelRegistry: model families by name, beside the strategy registry. A family declares its
// configuration as options (meshtrain/parallel/declared_options.h), names presets, and makes a
// ModelSpec from checked values; the command line builds its model flags from the declarations,
// and checkpoints name the family and its options so that a run resumes or converts without
// being told the model again. An ordinary object: meshtrain/models/builtin_models.h fills one
// with the built-in families, and a program adds its own beside them.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "meshtrain/models/model_spec.h"

namespace meshtrain {

struct ModelFamily {
  std::string name;  // "gpt2"
  std::string help;  // one line: what the family is
  std::vector<OptionSpec> options;
  // Preset name -> its option values (an option without a value takes the declared default).
  // Preset names are unique across a registry, so that a preset names its family.
  std::map<std::string, TextOptions> presets;
  std::function<ModelSpecPtr(const OptionValues&)> factory;
  // What the Hugging Face weights at `path` say of their configuration (from their tensors'
  // shapes and metadata), or nullopt when they are not this family's. `path` is one safetensors
  // file or a sharded model.safetensors.index.json: read it with SafetensorsSet
  // (meshtrain/models/safetensors_set.h), which takes both. Unset: the family reads no such files.
  std::function<std::optional<TextOptions>(const std::string& path)> read_safetensors{};
};

class ModelRegistry {
 public:
  // A duplicate family or preset name, a missing factory, a malformed declaration or a preset
  // the declarations refuse is rejected.
  void add(ModelFamily family);

  // A model of `family` configured by `options`. An unknown family lists the known ones; an
  // unknown option, a refused value or a missing one (no value and no default) names the option
  // and its flag.
  ModelSpecPtr create(const std::string& family, const TextOptions& options) const;
  // The preset `name` with `overrides` replacing its values (an unknown name lists the known
  // presets).
  ModelSpecPtr preset(const std::string& name, const TextOptions& overrides = {}) const;
  // The model a Hugging Face safetensors file holds, as the one family that recognises it reads
  // it; `given` supplies what the file does not say and must agree with what it says.
  ModelSpecPtr from_safetensors(const std::string& path, const TextOptions& given = {}) const;
  // The model of `family` that `source` holds with options `held`, `given` supplying the options
  // it does not hold and agreeing with those it does: "--dim 64 disagrees with <source>, which
  // holds dim 128".
  ModelSpecPtr agreeing(const std::string& family, TextOptions held, const TextOptions& given,
                        const std::string& source) const;

  std::vector<std::string> names() const;  // the families
  const ModelFamily& family(const std::string& name) const;
  std::vector<std::string> preset_names() const;
  // The family a preset belongs to.
  const ModelFamily& family_of_preset(const std::string& preset) const;

 private:
  std::map<std::string, ModelFamily> families_;
};

}  // namespace meshtrain
