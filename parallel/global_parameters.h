// The model's global parameters, assembled from every rank's pieces: for export (Hugging Face
// safetensors), sampling and tests that compare with the single-rank run.
#pragma once

#include "mesh/device_mesh.h"
#include "parallel/trainable_state.h"

namespace meshtrain {

// Collective over the world: calls fn(parameter, global fp32 value) for every parameter of `model`
// (the whole model, as built on every rank) on pp rank 0, and for its own stages' parameters on
// the other pp ranks. The trainable state assembles each compute piece from the data-parallel
// shards (FSDP: one unit unsharded at a time); pieces sharded over tp are then all-gathered over
// tp and placed by their layout, so a packed q | k | v weight comes out exactly as Hugging Face
// stores it; the other stages' parameters then travel over pp to its rank 0.
void for_each_global_parameter(TrainableState& state, const DeviceMesh& mesh, Model& model,
                               const ParameterVisitor& fn);

}  // namespace meshtrain
