// Units: parameter groups built from a grouping of a model's layers, with the order in which the
// engine first uses them forward and backward (what FSDP prefetches by).
#pragma once

#include <string>
#include <vector>

#include "meshtrain/parallel/model.h"

namespace meshtrain {

struct Unit {
  std::string name;
  std::vector<int> layers;          // ascending
  std::vector<Parameter*> params;   // each parameter once, in first-use order
  bool root = false;                // UnitSpec::root
};

struct UnitPlan {
  std::vector<Unit> units;
  std::vector<int> unit_of_layer;   // units[unit_of_layer[s]] owns layer l
  std::vector<int> forward_order;   // units by their first layer, ascending
  std::vector<int> backward_order;  // units by their last layer, descending
  // For each layer: is it its unit's first (last) layer in forward order?
  bool first_in_unit(int layer) const;
  bool last_in_unit(int layer) const;
};

// Checks the grouping: every layer in exactly one unit, unique non-empty names, and every
// parameter in one unit only (a tied parameter used by layers of two units is an error naming
// both uses).
UnitPlan make_unit_plan(Model& model, const std::vector<UnitSpec>& specs);

}  // namespace meshtrain
