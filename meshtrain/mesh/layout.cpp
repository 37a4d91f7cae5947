#include "meshtrain/mesh/layout.h"

#include <algorithm>

#include "meshtrain/core/error.h"
#include "meshtrain/mesh/axis_names.h"
#include "meshtrain/mesh/shard_math.h"

namespace meshtrain {

namespace {

// True when an entry on axis `entry` places the mesh axis (or "dp") `axis`.
bool covers(std::string_view entry, std::string_view axis) {
  const auto& data = mesh_axis::dp_axes;
  return entry == axis ||
         (entry == mesh_axis::dp && std::find(data.begin(), data.end(), axis) != data.end());
}

// The local tensor of a rank and the boxes of the global tensor it is made of.
struct Split {
  Shape local;
  std::vector<LocalPiece> pieces;
};

// Applies Shard(dim, blocks) at coordinate `index` of `parts` to the local tensor: each of the
// `blocks` equal blocks of the local dim keeps its chunk, and the kept chunks close up in block
// order. A piece may straddle several kept ranges (or none), so each is cut against each range.
void shard_pieces(Split& split, int dim, int blocks, int parts, int index) {
  const int64_t block = split.local[dim] / blocks;
  const ShardRange chunk = shard_range(block, parts, index);
  std::vector<LocalPiece> next;
  for (int b = 0; b < blocks; ++b) {
    const int64_t kept_begin = b * block + chunk.offset, kept_end = kept_begin + chunk.size;
    const int64_t moved_to = b * chunk.size;  // where the kept range lands in the new local dim
    for (const LocalPiece& p : split.pieces) {
      const int64_t p_begin = p.local_offset[dim], p_end = p_begin + p.global.shape[dim];
      const int64_t begin = std::max(kept_begin, p_begin), end = std::min(kept_end, p_end);
      if (begin >= end) continue;
      LocalPiece cut = p;
      cut.global.offset[dim] += begin - p_begin;
      cut.global.shape[dim] = end - begin;
      cut.local_offset[dim] = moved_to + (begin - kept_begin);
      next.push_back(std::move(cut));
    }
  }
  std::sort(next.begin(), next.end(), [](const LocalPiece& a, const LocalPiece& b) {
    return a.local_offset < b.local_offset;
  });
  split.pieces = std::move(next);
  split.local[dim] = blocks * chunk.size;
}

Split split_over(const Layout& layout, const Shape& global, const MeshLayout& mesh, int rank) {
  Split split{global, {}};
  if (shape_numel(global) > 0)
    split.pieces.push_back({{Shape(global.size(), 0), global}, Shape(global.size(), 0)});
  for (const auto& e : layout.entries()) {
    const int parts = mesh.span_size(e.axis);  // checks the mesh knows the axis
    const int index = mesh.span_coordinate(rank, e.axis);
    if (!e.placement.is_shard()) continue;
    const int dim = e.placement.shard_dim(), blocks = e.placement.shard_blocks();
    if (dim < 0 || dim >= static_cast<int>(global.size()))
      throw InvalidArgument(detail::concat("layout ", layout.to_string(), " shards dim ", dim,
                                           " of a tensor of shape ", shape_string(global)));
    if (split.local[dim] % blocks != 0)
      throw InvalidArgument(detail::concat(
          "layout ", layout.to_string(), " of a tensor of shape ", shape_string(global), ": ",
          e.axis, " splits dim ", dim, " of extent ", split.local[dim], " (local shape ",
          shape_string(split.local), ") into ", blocks, " blocks, which does not divide it"));
    shard_pieces(split, dim, blocks, parts, index);
  }
  return split;
}

}  // namespace

Layout::Layout(std::vector<AxisPlacement> entries) {
  for (auto& e : entries) *this = then(std::move(e.axis), e.placement);
}

Placement Layout::placement(std::string_view axis) const {
  for (const auto& e : entries_)
    if (covers(e.axis, axis)) return e.placement;
  return Replicate();
}

Layout Layout::then(std::string axis, Placement placement) const {
  for (const auto& e : entries_)
    if (covers(e.axis, axis) || covers(axis, e.axis))
      throw InvalidArgument(
          e.axis == axis
              ? detail::concat("layout ", to_string(), " already places axis '", axis, "'")
              : detail::concat("layout ", to_string(), " places '", e.axis,
                               "', which overlaps '", axis, "' (dp spans the data axes)"));
  Layout out = *this;
  out.entries_.push_back({std::move(axis), placement});
  return out;
}

std::vector<LocalPiece> Layout::local_pieces(const Shape& global, const MeshLayout& mesh,
                                             int rank) const {
  return split_over(*this, global, mesh, rank).pieces;
}

Shape Layout::local_shape(const Shape& global, const MeshLayout& mesh, int rank) const {
  return split_over(*this, global, mesh, rank).local;
}

std::string Layout::to_string() const {
  std::string out;
  for (const auto& e : entries_)
    out += (out.empty() ? "" : ", ") + e.axis + ": " + e.placement.to_string();
  return "[" + out + "]";
}

}  // namespace meshtrain
