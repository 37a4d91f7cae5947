#include "meshtrain/parallel/grad_norm.h"

#include <cmath>

#include "meshtrain/core/comm/gather_values.h"
#include "meshtrain/core/ops/ops.h"
#include "meshtrain/mesh/axis_names.h"

namespace meshtrain {

bool counts_replica(const Layout& layout, const DeviceMesh& mesh) {
  const std::vector<int> coords = mesh.coordinates();
  const std::vector<MeshAxis>& axes = mesh.layout().axes();
  for (size_t a = 0; a < axes.size(); ++a)
    if (axes[a].name != mesh_axis::pp && axes[a].size > 1 && !layout.shards_axis(axes[a].name) &&
        coords[a] != 0)
      return false;
  return true;
}

bool owns_slot(const OptimizerSlot& slot, const DeviceMesh& mesh) {
  return !slot.tied_copy && counts_replica(slot.layout, mesh);
}

double global_grad_norm(const std::vector<OptimizerSlot>& slots, const DeviceMesh& mesh) {
  std::vector<Tensor> owned;
  for (const OptimizerSlot& s : slots)
    if (owns_slot(s, mesh)) owned.push_back(s.grad);
  return std::sqrt(sum_in_rank_order(mesh.world(), ops::sum_squares(owned)));
}

}  // namespace meshtrain
