// Where an optimizer slot's elements sit in its parameter's global tensor, on this rank: what
// export (global_parameters.h) and checkpoints (meshtrain/train/training_checkpoint.h) both start from,
// on the ranks that own the slot (owns_slot, grad_norm.h).
#pragma once

#include <vector>

#include "meshtrain/mesh/device_mesh.h"
#include "meshtrain/parallel/optimizer_slot.h"
#include "meshtrain/parallel/parameter.h"

namespace meshtrain {

struct SlotPieces {
  Shape local_shape;               // the slot's flat tensor, shaped by its layout
  std::vector<LocalPiece> pieces;  // the global boxes it holds (Layout::local_pieces)
};

// InvalidArgument when the slot's size disagrees with its layout over `param`'s global shape.
SlotPieces slot_pieces(const OptimizerSlot& slot, const Parameter& param, const DeviceMesh& mesh);

}  // namespace meshtrain
