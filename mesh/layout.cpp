#include "mesh/layout.h"

#include "core/error.h"
#include "mesh/shard_math.h"

namespace meshtrain {

Layout::Layout(std::vector<AxisPlacement> entries) {
  for (auto& e : entries) *this = then(std::move(e.axis), e.placement);
}

Placement Layout::placement(std::string_view axis) const {
  for (const auto& e : entries_)
    if (e.axis == axis) return e.placement;
  return Replicate();
}

Layout Layout::then(std::string axis, Placement placement) const {
  for (const auto& e : entries_)
    MT_CHECK(e.axis != axis, "layout ", to_string(), " already places axis '", axis, "'");
  Layout out = *this;
  out.entries_.push_back({std::move(axis), placement});
  return out;
}

TensorSlice Layout::local_slice(const Shape& global, const MeshLayout& mesh, int rank) const {
  TensorSlice slice{Shape(global.size(), 0), global};
  const std::vector<int> coords = mesh.coordinates(rank);
  for (const auto& e : entries_) {
    const int axis = mesh.axis_index(e.axis);
    if (!e.placement.is_shard()) continue;
    const int dim = e.placement.shard_dim();
    MT_CHECK(dim >= 0 && dim < static_cast<int>(global.size()), "layout ", to_string(),
             " shards dim ", dim, " of a tensor of shape ", shape_string(global));
    const ShardRange r = shard_range(slice.shape[dim], mesh.axes()[axis].size, coords[axis]);
    slice.offset[dim] += r.offset;
    slice.shape[dim] = r.size;
  }
  return slice;
}

std::string Layout::to_string() const {
  std::string out;
  for (const auto& e : entries_)
    out += (out.empty() ? "" : ", ") + e.axis + ": " + e.placement.to_string();
  return "[" + out + "]";
}

}  // namespace meshtrain
