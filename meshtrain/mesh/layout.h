// Layout: how one tensor (a parameter, a gradient, an optimizer slot) is laid out over a mesh: a
// placement per axis, axes not listed being Replicate. An entry's axis is a mesh axis or
// mesh_axis::dp, the data axes flattened (see MeshLayout::span); each mesh axis is placed at most
// once, so "dp" and dp_replicate or dp_shard do not appear together.
//
// Shard order: entries apply in the order listed, each splitting the local tensor the previous ones
// left. Strategies append their axis when they apply (PP, then TP, then FSDP, as in torchtitan), so
// Layout({{"tp", Shard(1, 3)}, {"dp_shard", Shard(0)}}) first gives each tp rank its columns of q,
// k and v of GPT-2's packed c_attn [d, 3d], then splits the rows of that [d, 3d / tp] piece over
// dp_shard: FSDP shards the TP-local piece.
//
// Pieces: with plain Shard(dim) entries a rank's local tensor is one box of the global tensor; a
// blocked Shard(dim, blocks) makes it several boxes side by side. local_pieces() lists them with
// where each sits in the global and in the local tensor, so export, checkpoints and copies
// (layout_copy.h) know exactly which global slices every rank holds.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "meshtrain/core/tensor.h"
#include "meshtrain/mesh/mesh_layout.h"
#include "meshtrain/mesh/placement.h"

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

// One box of a rank's local tensor: where it sits in the global tensor, and where in the local one.
struct LocalPiece {
  TensorSlice global;
  Shape local_offset;
  bool operator==(const LocalPiece&) const = default;
};

class Layout {
 public:
  Layout() = default;  // replicated on every axis
  explicit Layout(std::vector<AxisPlacement> entries);  // axes must not overlap

  const std::vector<AxisPlacement>& entries() const { return entries_; }
  // The placement of the entry that covers `axis` (a mesh axis is covered by "dp" too); Replicate
  // when none does.
  Placement placement(std::string_view axis) const;
  // True when some entry shards the tensor over `axis` (a mesh axis), directly or through "dp".
  // Needs no mesh: a "dp" shard counts for both data axes, present or not.
  bool shards_axis(std::string_view axis) const { return placement(axis).is_shard(); }
  // This layout with one more axis applied last (the axis must not overlap a listed one).
  Layout then(std::string axis, Placement placement) const;

  // The boxes of `global` that `rank` of `mesh` holds, in local order (row-major by local offset);
  // they tile local_shape() exactly. Empty boxes are left out, so an empty piece has none. Partial
  // and Replicate entries do not change the pieces. Throws InvalidArgument for an axis the mesh
  // lacks, a dim out of range, or a blocked dim whose extent does not divide into its blocks.
  std::vector<LocalPiece> local_pieces(const Shape& global, const MeshLayout& mesh, int rank) const;
  Shape local_shape(const Shape& global, const MeshLayout& mesh, int rank) const;

  std::string to_string() const;  // "[tp: Shard(1, blocks=3), dp_shard: Shard(0)]"
  bool operator==(const Layout&) const = default;

 private:
  std::vector<AxisPlacement> entries_;
};

}  // namespace meshtrain
