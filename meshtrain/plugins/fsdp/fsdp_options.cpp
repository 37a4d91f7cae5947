#include "meshtrain/plugins/fsdp/fsdp_options.h"

#include "meshtrain/core/error.h"

namespace meshtrain {

FsdpMode parse_fsdp_mode(std::string_view text) {
  if (text == "full") return FsdpMode::full;
  if (text == "grad_op") return FsdpMode::grad_op;
  if (text == "none") return FsdpMode::none;
  if (text == "hybrid") return FsdpMode::hybrid;
  throw InvalidArgument(
      detail::concat("unknown FSDP mode '", text, "', expected full, grad_op, none or hybrid"));
}

std::string_view fsdp_mode_name(FsdpMode mode) {
  switch (mode) {
    case FsdpMode::full: return "full";
    case FsdpMode::grad_op: return "grad_op";
    case FsdpMode::none: return "none";
    case FsdpMode::hybrid: return "hybrid";
  }
  return "unknown";
}

std::function<std::vector<UnitSpec>(Model&)> group_units_policy(int blocks) {
  MT_CHECK(blocks >= 1, "a unit needs at least one block, got ", blocks);
  return [blocks](Model& model) {
    std::vector<UnitSpec> grouped;
    int in_group = blocks;  // units in the last group; a full one starts the next
    for (const UnitSpec& unit : model.default_units()) {
      if (unit.root) {
        grouped.push_back(unit);  // alone, and between groups
        in_group = blocks;
      } else if (in_group == blocks) {
        grouped.push_back(unit);
        in_group = 1;
      } else {
        grouped.back().name += "+" + unit.name;
        grouped.back().layers.insert(grouped.back().layers.end(), unit.layers.begin(),
                                     unit.layers.end());
        ++in_group;
      }
    }
    return grouped;
  };
}

GradSync parse_grad_sync(std::string_view text) {
  if (text == "every") return GradSync::every_micro_batch;
  if (text == "last") return GradSync::last_micro_batch;
  throw InvalidArgument(
      detail::concat("unknown gradient sync '", text, "', expected 'every' or 'last'"));
}

}  // namespace meshtrain
