// The global gradient norm of a training step, in every layout: each element of the model's
// gradient counted exactly once over the whole mesh.
//
// A slot's layout says which mesh axes shard it; along every other data or tensor axis of size > 1
// its gradient is a replica (LayerNorm weights and wpe under TP, row-parallel biases, every slot
// across dp_replicate), so only the rank at coordinate 0 of those axes adds it. The pp axis splits
// the model itself: each stage holds other parameters, and a parameter tied across stages counts
// on its first stage only (the others' copies are marked tied_copy). The local sums then add up
// over the world communicator, which no strategy counts its traffic on.
#pragma once

#include <vector>

#include "meshtrain/mesh/device_mesh.h"
#include "meshtrain/parallel/optimizer_slot.h"

namespace meshtrain {

// True when this rank adds `layout`'s tensor to mesh-wide sums (see above; pp is not checked).
bool counts_replica(const Layout& layout, const DeviceMesh& mesh);

// True on the one rank whose copy of the slot counts (and which stores or exports it): not a tied
// copy, and counts_replica.
bool owns_slot(const OptimizerSlot& slot, const DeviceMesh& mesh);

// Collective over the world: the L2 norm of the gradients of every rank's slots.
double global_grad_norm(const std::vector<OptimizerSlot>& slots, const DeviceMesh& mesh);

}  // namespace meshtrain
