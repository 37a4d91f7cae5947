// How `meshtrain plan` without --mesh shows its search (meshtrain/plan/layout_search.h): the
// fastest layouts that fit with their step and memory broken down, the nearest that do not with
// why, and what the run would refuse; or all of it as JSON for scripts.
#pragma once

#include <ostream>

#include "meshtrain/models/model_spec.h"
#include "meshtrain/plan/layout_search.h"

namespace meshtrain {

struct SearchReport {
  const ModelSpec& model;
  const SearchSpace& space;
  const MachineProfile& machine;
  const LayoutSearch& search;
  double seconds = 0;  // the search's own time
  int top = 10;        // layouts shown of each list (JSON: all)
};

void print_layout_search(const SearchReport& report, std::ostream& out);
void print_layout_search_json(const SearchReport& report, std::ostream& out);

}  // namespace meshtrain
