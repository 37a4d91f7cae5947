// The model's global parameters, assembled on one rank from every rank's slices: for export
// (Hugging Face safetensors), sampling and tests that compare with the single-rank run.
#pragma once

#include <functional>

#include "meshtrain/mesh/device_mesh.h"
#include "meshtrain/parallel/trainable_state.h"

namespace meshtrain {

// fn(parameter, global fp32 value).
using ParameterVisitor = std::function<void(const Parameter&, const Tensor&)>;

// Collective over the world: world rank 0 calls fn once for every parameter of `model` (the whole
// model as built on every rank, in its order) with its global value; the other ranks only send.
// Every slice travels once, straight from the shard its owner holds (TrainableState::held_slots)
// to rank 0 — replicas (counts_replica) and tied copies stay home, nothing is all-gathered — and
// each slice is placed by its layout, so a packed q | k | v weight comes out exactly as Hugging
// Face stores it. Rank 0 holds one global parameter at a time.
void gather_parameters(TrainableState& state, const DeviceMesh& mesh, Model& model,
                       const ParameterVisitor& fn);

}  // namespace meshtrain
