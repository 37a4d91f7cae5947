#include "meshtrain/parallel/activation_checkpointing.h"

#include "meshtrain/core/error.h"

namespace meshtrain {

std::string_view ac_mode_name(AcMode mode) {
  switch (mode) {
    case AcMode::none:
      return "none";
    case AcMode::full:
      return "full";
    case AcMode::selective:
      return "selective";
  }
  return "none";
}

AcMode parse_ac_mode(std::string_view text) {
  for (const AcMode mode : {AcMode::none, AcMode::full, AcMode::selective})
    if (text == ac_mode_name(mode)) return mode;
  throw InvalidArgument(
      detail::concat("activation checkpointing (--ac) is none, full or "
                     "selective, got '",
                     text, "'"));
}

std::vector<bool> recomputed_layers(const UnitPlan& plan, const ActivationCheckpointing& ac) {
  MT_CHECK(ac.every >= 1,
           "selective activation checkpointing recomputes every k-th block, k >= 1 "
           "(--ac-every), got ",
           ac.every);
  std::vector<bool> out(plan.unit_of_layer.size(), false);
  if (ac.mode == AcMode::none) return out;
  int block = 0;  // the layers outside the root unit, counted in forward order
  for (size_t l = 0; l < out.size(); ++l) {
    if (plan.units[plan.unit_of_layer[l]].root) continue;
    out[l] = ac.mode == AcMode::full || block % ac.every == 0;
    ++block;
  }
  return out;
}

}  // namespace meshtrain
