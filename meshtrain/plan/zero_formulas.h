// The ZeRO paper's closed forms for the model-state memory of one data-parallel rank
// (Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion Parameter Models",
// SC 2020, arXiv:1910.02054, section 5.1 and Table 1): Ψ parameters trained in mixed precision
// (2-byte parameters and gradients) with K bytes of optimizer state per parameter (K = 12 for
// mixed-precision Adam: the fp32 master copy, momentum and variance) over Nd data-parallel ranks:
//   DP (baseline)  (2 + 2 + K) Ψ
//   P_os           (2 + 2 + K / Nd) Ψ
//   P_os+g         (2 + (2 + K) / Nd) Ψ
//   P_os+g+p       (2 + 2 + K) Ψ / Nd
// meshtrain's FSDP keeps fp32 master shards and fp32 gradient shards (4 + 4 + 8 moments = 16
// bytes per element), so a model whose rows divide by Nd holds exactly P_os+g+p's 16 Ψ / Nd
// under mode full and DP's 16 Ψ under mode none.
#pragma once

#include <string_view>

namespace meshtrain {

enum class ZeroStage {
  dp,      // plain data parallelism: everything replicated
  os,      // P_os (ZeRO-1): optimizer state partitioned
  os_g,    // P_os+g (ZeRO-2): and gradients
  os_g_p,  // P_os+g+p (ZeRO-3, FSDP full): and parameters
};
std::string_view zero_stage_name(ZeroStage stage);  // "DP", "P_os", "P_os+g", "P_os+g+p"

// Bytes per rank (doubles: Ψ reaches 1e12). InvalidArgument unless psi >= 0, nd >= 1, k >= 0.
double zero_model_state_bytes(ZeroStage stage, double psi, double nd, double k = 12.0);

}  // namespace meshtrain
