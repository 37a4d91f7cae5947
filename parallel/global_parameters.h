// The model's global parameters, assembled from every rank's pieces: for export (Hugging Face
// safetensors), sampling and tests that compare with the single-rank run.
#pragma once

#include "mesh/device_mesh.h"
#include "parallel/trainable_state.h"

namespace meshtrain {

// Collective over the world: calls fn(parameter, global fp32 value) for every parameter. The
// trainable state assembles each compute piece from the data-parallel shards (FSDP: one unit
// unsharded at a time); pieces sharded over tp are then all-gathered over tp and placed by their
// layout, so a packed q | k | v weight comes out exactly as Hugging Face stores it.
void for_each_global_parameter(TrainableState& state, const DeviceMesh& mesh,
                               const ParameterVisitor& fn);

}  // namespace meshtrain
