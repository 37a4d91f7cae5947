// MeshLayout: the pure rank arithmetic of a device mesh (no communicators), so that coordinates and
// axis groups can be tested without threads.
//
// Axes are named and ordered outermost to innermost in the canonical order
//   pp, dp_replicate, dp_shard, tp
// (tp innermost, so a tp group is made of neighbouring ranks). Any subset may be given, size-1 axes
// included, but always in this order: an axis given out of order is rejected rather than silently
// reordered, because the order decides which ranks end up neighbours. A rank is the row-major index
// of its coordinates.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace meshtrain {

struct MeshAxis {
  std::string name;
  int size = 1;
  bool operator==(const MeshAxis&) const = default;
};

// The known axis names, outermost first.
const std::vector<std::string>& canonical_mesh_axes();

class MeshLayout {
 public:
  MeshLayout() = default;  // no axes: one rank
  // Throws InvalidArgument for unknown or duplicate names, sizes below 1 and out-of-order axes.
  explicit MeshLayout(std::vector<MeshAxis> axes);

  const std::vector<MeshAxis>& axes() const { return axes_; }
  int ndim() const { return static_cast<int>(axes_.size()); }
  int size() const { return size_; }  // product of the axis sizes
  std::vector<std::string> axis_names() const;
  bool has_axis(std::string_view name) const;
  int axis_index(std::string_view name) const;  // throws naming the axes this mesh has
  int axis_size(std::string_view name) const;

  // The names a Layout entry may use: a mesh axis of this mesh, or mesh_axis::dp, the data axes
  // dp_replicate and dp_shard (those present, possibly none) flattened, as DeviceMesh's "dp"
  // communicator flattens them. span() gives the mesh axes a name covers, in mesh order, and
  // throws naming the known names for any other name.
  std::vector<std::string> span(std::string_view name) const;
  int span_size(std::string_view name) const;  // product of the spanned sizes; 1 for none
  // Row-major coordinate of `rank` over the spanned axes: its rank in that axis' communicator.
  int span_coordinate(int rank, std::string_view name) const;

  // Throws "pp(2) * dp_shard(2) * tp(2) = 8 != world size 6" unless size() == world_size.
  void check_world_size(int world_size) const;

  std::vector<int> coordinates(int rank) const;
  int rank_of(const std::vector<int>& coordinates) const;

  // The groups of ranks that differ only in the given axes (which must be axes of this mesh, in
  // mesh order): "move those axes last, reshape". Each group lists its ranks row-major in the given
  // axes; groups come in order of their first rank.
  std::vector<std::vector<int>> groups(const std::vector<std::string>& axes) const;
  std::vector<int> group_of(int rank, const std::vector<std::string>& axes) const;
  // Position of rank inside group_of(rank, axes): its row-major coordinate in those axes.
  int group_rank(int rank, const std::vector<std::string>& axes) const;
  // The lowest and highest ranks of group_of(rank, axes), without listing the group (a planner
  // asks for groups of thousands, for thousands of ranks): ranks grow with every coordinate, so
  // they are the members with the given axes' coordinates all 0 and all at their largest.
  std::pair<int, int> group_bounds(int rank, const std::vector<std::string>& axes) const;

  // The layout of the given axes alone (a sub-mesh's shape).
  MeshLayout sub_layout(const std::vector<std::string>& axes) const;

  // "pp=2,dp_shard=2,tp=2", which parse_mesh_spec reads back; "(no axes)" for the empty mesh.
  std::string to_string() const;
  bool operator==(const MeshLayout& other) const { return axes_ == other.axes_; }

 private:
  // Indices of the named axes; checks they exist, are distinct and in mesh order.
  std::vector<int> axis_indices(const std::vector<std::string>& axes) const;
  void check_rank(int rank) const;

  std::vector<MeshAxis> axes_;
  int size_ = 1;
};

// Parses a CLI mesh spec such as "pp=2,dp_shard=2,tp=2" (spaces around items allowed).
MeshLayout parse_mesh_spec(std::string_view spec);

}  // namespace meshtrain
