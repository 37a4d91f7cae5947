#include "meshtrain/plan/unit_buffers.h"

#include <algorithm>

#include "meshtrain/core/error.h"

namespace meshtrain {

int64_t unsharded_param_peak(const UnitPlan& plan, const std::vector<UnitBuffer>& units,
                             bool pipelined) {
  MT_CHECK(units.size() == plan.units.size(), "unsharded_param_peak: ", units.size(),
           " unit buffers for ", plan.units.size(), " units");
  if (pipelined) {
    int64_t all = 0;
    for (const UnitBuffer& u : units) all += u.bytes;
    return all;
  }
  std::vector<bool> unsharded(units.size(), false);
  int64_t current = 0, peak = 0;
  const auto unshard = [&](int u) {
    if (unsharded[u]) return;
    unsharded[u] = true;
    current += units[u].bytes;
    peak = std::max(peak, current);
  };
  const auto reshard = [&](int u) {
    if (!unsharded[u]) return;
    unsharded[u] = false;
    current -= units[u].bytes;
  };
  const int layers = static_cast<int>(plan.unit_of_layer.size());
  for (int l = 0; l < layers; ++l) {  // forward: pre_forward, the layer, post_forward
    const int u = plan.unit_of_layer[l];
    if (plan.first_in_unit(l)) unshard(u);
    if (plan.last_in_unit(l) && units[u].reshard_after_forward) reshard(u);
  }
  for (int l = layers - 1; l >= 0; --l) {  // backward: pre_backward, the layer, post_backward
    const int u = plan.unit_of_layer[l];
    if (plan.last_in_unit(l)) unshard(u);
    if (plan.first_in_unit(l)) reshard(u);
  }
  return peak;
}

}  // namespace meshtrain
