// Layout: how one tensor (a parameter, a gradient) is laid out over a mesh: a placement per mesh
// axis, axes not listed being Replicate.
//
// Shard order: sharding is applied in the order the layout lists its axes, each axis splitting the
// piece the previous ones left. Strategies append their axis when they apply (PP, then TP, then
// FSDP, as in torchtitan), so Layout({{"tp", Shard(0)}, {"dp_shard", Shard(0)}}) first splits dim 0
// over tp and then splits each tp piece over dp_shard: FSDP shards the TP-local piece. With that
// order the piece a rank holds is always one box of the global tensor, which local_slice() names,
// so a checkpoint knows exactly which global slice every rank holds.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"
#include "mesh/mesh_layout.h"
#include "mesh/placement.h"

namespace meshtrain {

struct AxisPlacement {
  std::string axis;
  Placement placement;
  bool operator==(const AxisPlacement&) const = default;
};

// A box of a global tensor: per dim, where it starts and how long it is.
struct TensorSlice {
  Shape offset;
  Shape shape;
  bool operator==(const TensorSlice&) const = default;
};

class Layout {
 public:
  Layout() = default;  // replicated on every axis
  explicit Layout(std::vector<AxisPlacement> entries);  // axes must be distinct

  const std::vector<AxisPlacement>& entries() const { return entries_; }
  Placement placement(std::string_view axis) const;  // Replicate when the axis is not listed
  // This layout with one more axis applied last (the axis must not be listed yet).
  Layout then(std::string axis, Placement placement) const;

  // The box of `global` held by `rank` of `mesh`. Partial axes do not change the box.
  TensorSlice local_slice(const Shape& global, const MeshLayout& mesh, int rank) const;

  std::string to_string() const;  // "[tp: Shard(0), dp_shard: Shard(0)]"
  bool operator==(const Layout&) const = default;

 private:
  std::vector<AxisPlacement> entries_;
};

}  // namespace meshtrain
