#include "meshtrain/parallel/units.h"

#include <algorithm>
#include <map>
#include <set>

#include "meshtrain/core/error.h"

namespace meshtrain {

bool UnitPlan::first_in_unit(int layer) const {
  return units[unit_of_layer[layer]].layers.front() == layer;
}

bool UnitPlan::last_in_unit(int layer) const {
  return units[unit_of_layer[layer]].layers.back() == layer;
}

UnitPlan make_unit_plan(Model& model, const std::vector<UnitSpec>& specs) {
  const std::vector<Layer*> layers = model.layers();
  const int num_layers = static_cast<int>(layers.size());
  UnitPlan plan;
  plan.unit_of_layer.assign(num_layers, -1);
  std::set<std::string> names;
  for (const UnitSpec& spec : specs) {
    MT_CHECK(!spec.name.empty(), "a unit needs a name");
    MT_CHECK(names.insert(spec.name).second, "duplicate unit name '", spec.name, "'");
    MT_CHECK(!spec.layers.empty(), "unit '", spec.name, "' has no layers");
    const int unit = static_cast<int>(plan.units.size());
    Unit u{spec.name, spec.layers, {}, spec.root};
    std::sort(u.layers.begin(), u.layers.end());
    for (int s : u.layers) {
      MT_CHECK(s >= 0 && s < num_layers, "unit '", spec.name, "' names layer ", s, " of ",
               num_layers);
      MT_CHECK(plan.unit_of_layer[s] != unit, "unit '", spec.name, "' lists layer '",
               layers[s]->name(), "' twice");
      MT_CHECK(plan.unit_of_layer[s] == -1, "layer '", layers[s]->name(), "' is in unit '",
               plan.units[plan.unit_of_layer[s]].name, "' and in unit '", spec.name, "'");
      plan.unit_of_layer[s] = unit;
    }
    plan.units.push_back(std::move(u));
  }
  for (int s = 0; s < num_layers; ++s)
    MT_CHECK(plan.unit_of_layer[s] >= 0, "layer '", layers[s]->name(), "' belongs to no unit");

  // Each parameter joins the unit of the first layer that uses it; a use from another unit is an
  // error (its full value would have to exist in two units at once).
  std::map<Parameter*, int> first_use_layer;
  for (int s = 0; s < num_layers; ++s) {
    for (Parameter* p : layers[s]->parameters()) {
      auto [it, inserted] = first_use_layer.emplace(p, s);
      const int owner = plan.unit_of_layer[it->second];
      if (inserted) {
        plan.units[owner].params.push_back(p);
      } else if (owner != plan.unit_of_layer[s]) {
        throw InvalidArgument(detail::concat(
            "parameter '", p->name(), "' is used by layer '", layers[it->second]->name(),
            "' in unit '", plan.units[owner].name, "' and by layer '", layers[s]->name(),
            "' in unit '", plan.units[plan.unit_of_layer[s]].name,
            "'; tied parameters must sit in one unit"));
      }
    }
  }

  const int num_units = static_cast<int>(plan.units.size());
  for (int u = 0; u < num_units; ++u) plan.forward_order.push_back(u);
  plan.backward_order = plan.forward_order;
  std::sort(plan.forward_order.begin(), plan.forward_order.end(),
            [&](int a, int b) { return plan.units[a].layers.front() < plan.units[b].layers.front(); });
  std::sort(plan.backward_order.begin(), plan.backward_order.end(),
            [&](int a, int b) { return plan.units[a].layers.back() > plan.units[b].layers.back(); });
  return plan;
}

}  // namespace meshtrain
