#include "meshtrain/models/checkpoint.h"

#include <map>

#include "meshtrain/core/error.h"
#include "meshtrain/mesh/box_runs.h"

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

SafetensorsValues::SafetensorsValues(const std::string& path,
                                     const std::vector<Parameter*>& params)
    : path_(path), weights_(path) {
  std::map<std::string, const Parameter*> by_name;
  for (const Parameter* p : params) by_name[p->name()] = p;
  for (const SafetensorsEntry& e : weights_.entries()) {
    const std::optional<std::string> name = checkpoint_parameter_name(e.name);
    if (!name) continue;
    const auto it = by_name.find(*name);
    MT_CHECK(it != by_name.end(), "checkpoint '", path, "': key '", e.name,
             "' names no parameter of the model");
    MT_CHECK(!key_of_.count(*name), "checkpoint '", path, "': parameter '", *name,
             "' is given twice, by '", key_of_[*name], "' and '", e.name, "'");
    key_of_[*name] = e.name;
    MT_CHECK(e.shape == it->second->global_shape(), "checkpoint '", path, "': key '", e.name,
             "' has shape ", shape_string(e.shape), ", the model expects ",
             shape_string(it->second->global_shape()));
    MT_CHECK(e.dtype == "F32" || e.dtype == "BF16", "checkpoint '", path, "': key '", e.name,
             "' is ", e.dtype, "; expected F32 or BF16");
  }
  for (const Parameter* p : params)
    MT_CHECK(key_of_.count(p->name()), "checkpoint '", path, "' has no key for parameter '",
             p->name(), "'");
}

void SafetensorsValues::read(const Parameter& p, const std::vector<LocalPiece>& pieces,
                             const Tensor& local) const {
  const auto key = key_of_.find(p.name());
  MT_CHECK(key != key_of_.end(), "checkpoint '", path_, "': parameter '", p.name(),
           "' was not checked against this file");
  fill_from_boxes(local, pieces, [&](const TensorSlice& box, const Tensor& out) {
    for_each_box_run(p.global_shape(), box, [&](int64_t at, int64_t in_box, int64_t n) {
      weights_.read(key->second, out.view(in_box, {n}), at);
    });
  });
}

void load_parameters(const std::vector<Parameter*>& params, const std::string& path) {
  const SafetensorsValues values(path, params);
  for (Parameter* p : params) {
    MT_CHECK(p->shape() == p->global_shape(), "load_parameters: parameter '", p->name(),
             "' is sharded; place the model with SafetensorsValues instead");
    fill_local(values, *p, Layout(), MeshLayout(), 0, p->value());  // whole, on one rank
  }
}

void save_parameters(const std::vector<Parameter*>& params, const std::string& path, DType dtype) {
  std::vector<SafetensorsSpec> specs;
  for (Parameter* p : params) specs.push_back({p->name(), dtype, p->shape()});
  SafetensorsWriter writer(path, std::move(specs), {{"format", "pt"}});
  for (Parameter* p : params) writer.write(p->name(), p->value());
  writer.finish();
}

}  // namespace meshtrain
