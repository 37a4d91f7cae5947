#include "models/checkpoint.h"

#include <map>

#include "core/error.h"
#include "models/safetensors.h"

namespace meshtrain {

namespace {
bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}
}  // namespace

std::optional<std::string> checkpoint_parameter_name(std::string_view key) {
  if (key.starts_with("transformer.")) key.remove_prefix(std::string_view("transformer.").size());
  if (ends_with(key, ".attn.bias") || ends_with(key, ".attn.masked_bias")) return std::nullopt;
  return std::string(key);
}

void load_parameters(const std::vector<Parameter*>& params, const std::string& path) {
  SafetensorsReader reader(path);
  std::map<std::string, Parameter*> by_name;
  for (Parameter* p : params) by_name[p->name()] = p;
  std::map<std::string, std::string> key_of;  // parameter name -> the key that holds it
  for (const SafetensorsEntry& e : reader.entries()) {
    const std::optional<std::string> name = checkpoint_parameter_name(e.name);
    if (!name) continue;
    const auto it = by_name.find(*name);
    MT_CHECK(it != by_name.end(), "checkpoint '", path, "': key '", e.name,
             "' names no parameter of the model");
    MT_CHECK(!key_of.count(*name), "checkpoint '", path, "': parameter '", *name,
             "' is given twice, by '", key_of[*name], "' and '", e.name, "'");
    key_of[*name] = e.name;
    MT_CHECK(e.shape == it->second->shape(), "checkpoint '", path, "': key '", e.name,
             "' has shape ", shape_string(e.shape), ", the model expects ",
             shape_string(it->second->shape()));
    MT_CHECK(e.dtype == "F32" || e.dtype == "BF16", "checkpoint '", path, "': key '", e.name,
             "' is ", e.dtype, "; expected F32 or BF16");
  }
  for (Parameter* p : params)
    MT_CHECK(key_of.count(p->name()), "checkpoint '", path, "' has no key for parameter '",
             p->name(), "'");
  for (Parameter* p : params) reader.read(key_of[p->name()], p->value());
}

void save_parameters(const std::vector<Parameter*>& params, const std::string& path, DType dtype) {
  std::vector<SafetensorsSpec> specs;
  for (Parameter* p : params) specs.push_back({p->name(), dtype, p->shape()});
  SafetensorsWriter writer(path, std::move(specs), {{"format", "pt"}});
  for (Parameter* p : params) writer.write(p->name(), p->value());
  writer.finish();
}

}  // namespace meshtrain
