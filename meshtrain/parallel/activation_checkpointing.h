// Activation checkpointing (recomputation, Chen et al. 2016): a recomputed layer keeps only its
// input from forward to backward and runs its forward again just before its backward, trading one
// more forward of it for all the activations it would have saved. As torchtitan's
// activation_checkpoint.mode and Megatron's --recompute-granularity:
//   none       every layer keeps what its backward needs;
//   full       every layer outside the root unit (the transformer blocks) is recomputed;
//   selective  every `every`-th of those blocks is recomputed (torchtitan's layer-wise selective),
//              the others keep their activations.
// The recompute runs the same kernels on the same input, so losses and gradients are bit for bit
// those of the run without it. It composes with FSDP (backward's pre-hook has gathered the unit
// before the recompute), TP (the recompute repeats the forward collectives, in lockstep on every
// tp rank) and every pipeline schedule (a split backward recomputes in its input part).
#pragma once

#include <string_view>
#include <vector>

#include "meshtrain/parallel/units.h"

namespace meshtrain {

enum class AcMode { none, full, selective };

struct ActivationCheckpointing {
  AcMode mode = AcMode::none;
  int every = 2;  // selective: the blocks 0, every, 2 every, ... are recomputed

  bool operator==(const ActivationCheckpointing&) const = default;
};

std::string_view ac_mode_name(AcMode mode);
// "none", "full" or "selective"; InvalidArgument naming the three otherwise.
AcMode parse_ac_mode(std::string_view text);

// For each layer of `plan`: whether `ac` recomputes it. InvalidArgument for `every` < 1.
std::vector<bool> recomputed_layers(const UnitPlan& plan, const ActivationCheckpointing& ac);

}  // namespace meshtrain
