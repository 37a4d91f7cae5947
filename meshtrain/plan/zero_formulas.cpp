#include "meshtrain/plan/zero_formulas.h"

#include "meshtrain/core/error.h"

namespace meshtrain {

std::string_view zero_stage_name(ZeroStage stage) {
  switch (stage) {
    case ZeroStage::dp:
      return "DP";
    case ZeroStage::os:
      return "P_os";
    case ZeroStage::os_g:
      return "P_os+g";
    case ZeroStage::os_g_p:
      return "P_os+g+p";
  }
  return "unknown";
}

double zero_model_state_bytes(ZeroStage stage, double psi, double nd, double k) {
  MT_CHECK(psi >= 0, "ZeRO's model state: the parameter count must not be negative, got ", psi);
  MT_CHECK(nd >= 1, "ZeRO's model state: the data-parallel degree must be at least 1, got ", nd);
  MT_CHECK(k >= 0, "ZeRO's model state: optimizer bytes per parameter must not be negative, got ",
           k);
  constexpr double kParam = 2, kGrad = 2;  // fp16 parameters and gradients
  switch (stage) {
    case ZeroStage::dp:
      return (kParam + kGrad + k) * psi;
    case ZeroStage::os:
      return (kParam + kGrad + k / nd) * psi;
    case ZeroStage::os_g:
      return (kParam + (kGrad + k) / nd) * psi;
    case ZeroStage::os_g_p:
      return (kParam + kGrad + k) * psi / nd;
  }
  throw InvalidArgument("unknown ZeRO stage");
}

}  // namespace meshtrain
