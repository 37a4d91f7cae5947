#include "meshtrain/parallel/slot_pieces.h"

#include "meshtrain/core/error.h"

namespace meshtrain {

SlotPieces slot_pieces(const OptimizerSlot& slot, const Parameter& param, const DeviceMesh& mesh) {
  const Shape& global = param.global_shape();
  SlotPieces out{slot.layout.local_shape(global, mesh.layout(), mesh.rank()),
                 slot.layout.local_pieces(global, mesh.layout(), mesh.rank())};
  MT_ASSERT_EQ(shape_numel(out.local_shape), slot.param.numel(), "slot '", slot.name,
               "' disagrees with its layout ", slot.layout.to_string());
  return out;
}

}  // namespace meshtrain
