// Units: parameter groups built from a grouping of a model's stages, with the order in which the
// engine first uses them forward and backward (what FSDP prefetches by).
#pragma once

#include <string>
#include <vector>

#include "parallel/model.h"

namespace meshtrain {

struct Unit {
  std::string name;
  std::vector<int> stages;          // ascending
  std::vector<Parameter*> params;   // each parameter once, in first-use order
};

struct UnitPlan {
  std::vector<Unit> units;
  std::vector<int> unit_of_stage;   // units[unit_of_stage[s]] owns stage s
  std::vector<int> forward_order;   // units by their first stage, ascending
  std::vector<int> backward_order;  // units by their last stage, descending
  // For each stage: is it its unit's first (last) stage in forward order?
  bool first_in_unit(int stage) const;
  bool last_in_unit(int stage) const;
};

// Checks the grouping: every stage in exactly one unit, unique non-empty names, and every
// parameter in one unit only (a tied parameter used by stages of two units is an error naming
// both uses).
UnitPlan make_unit_plan(Model& model, const std::vector<UnitSpec>& specs);

}  // namespace meshtrain
