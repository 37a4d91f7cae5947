#include "meshtrain/plugins/pp/stage_model.h"

#include <map>
#include <set>
#include <string>

#include "meshtrain/core/error.h"
#include "meshtrain/core/parse_integer.h"

namespace meshtrain {

std::vector<LayerSpan> partition_layers(int num_layers, int stages,
                                        const std::vector<int>& layers_per_stage) {
  MT_CHECK(stages >= 1, "a pipeline needs at least one stage, got ", stages);
  MT_CHECK(num_layers >= stages, "a pipeline of ", stages, " stages needs at least as many layers; "
           "the model has ", num_layers);
  std::vector<int> counts = layers_per_stage;
  if (counts.empty())
    for (int s = 0; s < stages; ++s)
      counts.push_back((s + 1) * num_layers / stages - s * num_layers / stages);
  MT_CHECK(static_cast<int>(counts.size()) == stages, "--pp-layers gives a layer count per stage (",
           stages, " stages = pp x virtual stages), got ", counts.size(), " counts");
  std::vector<LayerSpan> spans;
  int next = 0;
  for (int count : counts) {
    MT_CHECK(count >= 1, "--pp-layers: every stage needs at least one layer, got ", count);
    spans.push_back({next, next + count - 1});
    next += count;
  }
  MT_CHECK(next == num_layers, "--pp-layers must add up to the model's layers (embedding, blocks, "
           "head): ", num_layers, ", got ", next);
  return spans;
}

std::vector<int> parse_layer_counts(std::string_view text) {
  std::vector<int> counts;
  // Every item, also an empty one: "" and "1,3," are refused, not read as fewer stages.
  for (bool more = true; more;) {
    const size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    const std::optional<int> value = parse_integer<int>(item);
    MT_CHECK(value.has_value(), "--pp-layers expects comma-separated layer counts such as 3,2,2,3, "
             "got '", item, "'");
    counts.push_back(*value);
    more = comma != std::string_view::npos;
    if (more) text = text.substr(comma + 1);
  }
  return counts;
}

StageModel::StageModel(Model& full, const std::vector<LayerSpan>& stage_spans) : full_(full) {
  const std::vector<Layer*> all = full.layers();
  std::map<int, int> local_of;  // global layer -> local layer
  for (const LayerSpan& span : stage_spans) {
    const int first = static_cast<int>(layers_.size());
    for (int l = span.first; l <= span.last; ++l) {
      local_of[l] = static_cast<int>(layers_.size());
      layers_.push_back(all.at(l));
    }
    local_spans_.push_back({first, static_cast<int>(layers_.size()) - 1});
  }
  std::set<Parameter*> used;
  for (Layer* layer : layers_)
    for (Parameter* p : layer->parameters()) used.insert(p);
  for (Parameter* p : full.parameters())
    if (used.count(p)) params_.push_back(p);
  for (const UnitSpec& unit : full.default_units()) {
    UnitSpec mine{unit.name, {}, unit.root};
    for (int l : unit.layers)
      if (auto it = local_of.find(l); it != local_of.end()) mine.layers.push_back(it->second);
    if (!mine.layers.empty()) units_.push_back(std::move(mine));
  }
}

}  // namespace meshtrain
