#include "parallel/units.h"

#include <algorithm>
#include <map>
#include <set>

#include "core/error.h"

namespace meshtrain {

bool UnitPlan::first_in_unit(int stage) const {
  return units[unit_of_stage[stage]].stages.front() == stage;
}

bool UnitPlan::last_in_unit(int stage) const {
  return units[unit_of_stage[stage]].stages.back() == stage;
}

UnitPlan make_unit_plan(Model& model, const std::vector<UnitSpec>& specs) {
  const std::vector<Stage*> stages = model.stages();
  const int num_stages = static_cast<int>(stages.size());
  UnitPlan plan;
  plan.unit_of_stage.assign(num_stages, -1);
  std::set<std::string> names;
  for (const UnitSpec& spec : specs) {
    MT_CHECK(!spec.name.empty(), "a unit needs a name");
    MT_CHECK(names.insert(spec.name).second, "duplicate unit name '", spec.name, "'");
    MT_CHECK(!spec.stages.empty(), "unit '", spec.name, "' has no stages");
    const int unit = static_cast<int>(plan.units.size());
    Unit u{spec.name, spec.stages, {}};
    std::sort(u.stages.begin(), u.stages.end());
    for (int s : u.stages) {
      MT_CHECK(s >= 0 && s < num_stages, "unit '", spec.name, "' names stage ", s, " of ",
               num_stages);
      MT_CHECK(plan.unit_of_stage[s] != unit, "unit '", spec.name, "' lists stage '",
               stages[s]->name(), "' twice");
      MT_CHECK(plan.unit_of_stage[s] == -1, "stage '", stages[s]->name(), "' is in unit '",
               plan.units[plan.unit_of_stage[s]].name, "' and in unit '", spec.name, "'");
      plan.unit_of_stage[s] = unit;
    }
    plan.units.push_back(std::move(u));
  }
  for (int s = 0; s < num_stages; ++s)
    MT_CHECK(plan.unit_of_stage[s] >= 0, "stage '", stages[s]->name(), "' belongs to no unit");

  // Each parameter joins the unit of the first stage that uses it; a use from another unit is an
  // error (its full value would have to exist in two units at once).
  std::map<Parameter*, int> first_use_stage;
  for (int s = 0; s < num_stages; ++s) {
    for (Parameter* p : stages[s]->parameters()) {
      auto [it, inserted] = first_use_stage.emplace(p, s);
      const int owner = plan.unit_of_stage[it->second];
      if (inserted) {
        plan.units[owner].params.push_back(p);
      } else if (owner != plan.unit_of_stage[s]) {
        throw InvalidArgument(detail::concat(
            "parameter '", p->name(), "' is used by stage '", stages[it->second]->name(),
            "' in unit '", plan.units[owner].name, "' and by stage '", stages[s]->name(),
            "' in unit '", plan.units[plan.unit_of_stage[s]].name,
            "'; tied parameters must sit in one unit"));
      }
    }
  }

  const int num_units = static_cast<int>(plan.units.size());
  for (int u = 0; u < num_units; ++u) plan.forward_order.push_back(u);
  plan.backward_order = plan.forward_order;
  std::sort(plan.forward_order.begin(), plan.forward_order.end(),
            [&](int a, int b) { return plan.units[a].stages.front() < plan.units[b].stages.front(); });
  std::sort(plan.backward_order.begin(), plan.backward_order.end(),
            [&](int a, int b) { return plan.units[a].stages.back() > plan.units[b].stages.back(); });
  return plan;
}

}  // namespace meshtrain
