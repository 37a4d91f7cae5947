#include "meshtrain/mesh/mesh_layout.h"

#include <algorithm>

#include "meshtrain/core/error.h"
#include "meshtrain/core/parse_integer.h"
#include "meshtrain/mesh/axis_names.h"

namespace meshtrain {

namespace {

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

int canonical_index(const std::string& name) {
  const auto& known = canonical_mesh_axes();
  const auto it = std::find(known.begin(), known.end(), name);
  if (it == known.end())
    throw InvalidArgument("unknown mesh axis '" + name + "'; known axes are " + join(known));
  return static_cast<int>(it - known.begin());
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

}  // namespace

const std::vector<std::string>& canonical_mesh_axes() {
  static const std::vector<std::string> axes{std::string(mesh_axis::pp),
                                             std::string(mesh_axis::dp_replicate),
                                             std::string(mesh_axis::dp_shard),
                                             std::string(mesh_axis::tp)};
  return axes;
}

MeshLayout::MeshLayout(std::vector<MeshAxis> axes) : axes_(std::move(axes)) {
  int previous = -1;
  for (size_t i = 0; i < axes_.size(); ++i) {
    const MeshAxis& axis = axes_[i];
    const int index = canonical_index(axis.name);
    if (index == previous) throw InvalidArgument("mesh axis '" + axis.name + "' given twice");
    if (index < previous)
      throw InvalidArgument("mesh axis '" + axis.name + "' given after '" + axes_[i - 1].name +
                            "'; axes must be listed outermost to innermost in the order " +
                            join(canonical_mesh_axes()));
    if (axis.size < 1)
      throw InvalidArgument(detail::concat("mesh axis '", axis.name, "' has size ", axis.size,
                                           "; sizes must be at least 1"));
    previous = index;
    MT_CHECK(int64_t{size_} * axis.size <= int64_t{1} << 24, "mesh axis '", axis.name,
             "' of size ", axis.size,
             " makes the mesh larger than the 2^24 ranks meshtrain supports");
    size_ *= axis.size;
  }
}

std::vector<std::string> MeshLayout::axis_names() const {
  std::vector<std::string> names;
  for (const auto& a : axes_) names.push_back(a.name);
  return names;
}

bool MeshLayout::has_axis(std::string_view name) const {
  return std::any_of(axes_.begin(), axes_.end(), [&](const MeshAxis& a) { return a.name == name; });
}

int MeshLayout::axis_index(std::string_view name) const {
  for (int i = 0; i < ndim(); ++i)
    if (axes_[i].name == name) return i;
  throw InvalidArgument(detail::concat("mesh ", to_string(), " has no axis '", name,
                                       "'; its axes are ", axes_.empty() ? "none" : join(axis_names())));
}

int MeshLayout::axis_size(std::string_view name) const { return axes_[axis_index(name)].size; }

std::vector<std::string> MeshLayout::span(std::string_view name) const {
  if (has_axis(name)) return {std::string(name)};
  if (name == mesh_axis::dp) {
    std::vector<std::string> data_axes;
    for (std::string_view axis : mesh_axis::dp_axes)
      if (has_axis(axis)) data_axes.emplace_back(axis);
    return data_axes;
  }
  std::vector<std::string> known = axis_names();
  known.emplace_back(mesh_axis::dp);
  throw InvalidArgument(detail::concat("mesh ", to_string(), " has no axis '", name,
                                       "'; its axes are ", join(known)));
}

int MeshLayout::span_size(std::string_view name) const {
  int size = 1;
  for (const auto& axis : span(name)) size *= axis_size(axis);
  return size;
}

int MeshLayout::span_coordinate(int rank, std::string_view name) const {
  return group_rank(rank, span(name));
}

void MeshLayout::check_world_size(int world_size) const {
  if (size_ == world_size) return;
  std::string product;
  for (const auto& a : axes_)
    product += detail::concat(product.empty() ? "" : " * ", a.name, "(", a.size, ")");
  if (product.empty()) product = "an empty mesh";
  throw InvalidArgument(
      detail::concat(product, " = ", size_, " != world size ", world_size));
}

void MeshLayout::check_rank(int rank) const {
  MT_CHECK(rank >= 0 && rank < size_, "rank ", rank, " outside mesh ", to_string(), " of ", size_,
           " ranks");
}

std::vector<int> MeshLayout::coordinates(int rank) const {
  check_rank(rank);
  std::vector<int> coords(axes_.size());
  for (int i = ndim() - 1; i >= 0; --i) {
    coords[i] = rank % axes_[i].size;
    rank /= axes_[i].size;
  }
  return coords;
}

int MeshLayout::rank_of(const std::vector<int>& coordinates) const {
  MT_CHECK(coordinates.size() == axes_.size(), "expected ", axes_.size(),
           " coordinates for mesh ", to_string(), ", got ", coordinates.size());
  int rank = 0;
  for (int i = 0; i < ndim(); ++i) {
    MT_CHECK(coordinates[i] >= 0 && coordinates[i] < axes_[i].size, "coordinate ", coordinates[i],
             " outside axis '", axes_[i].name, "' of size ", axes_[i].size);
    rank = rank * axes_[i].size + coordinates[i];
  }
  return rank;
}

std::vector<int> MeshLayout::axis_indices(const std::vector<std::string>& axes) const {
  std::vector<int> indices;
  for (const auto& name : axes) {
    const int i = axis_index(name);
    if (!indices.empty() && i <= indices.back())
      throw InvalidArgument("axes " + join(axes) + " of mesh " + to_string() +
                            " must be distinct and listed in mesh order (" + join(axis_names()) +
                            ")");
    indices.push_back(i);
  }
  return indices;
}

std::vector<int> MeshLayout::group_of(int rank, const std::vector<std::string>& axes) const {
  const std::vector<int> indices = axis_indices(axes);
  std::vector<int> coords = coordinates(rank);
  int count = 1;
  for (int i : indices) {
    coords[i] = 0;
    count *= axes_[i].size;
  }
  // Count through the group's coordinates like an odometer, innermost given axis fastest.
  std::vector<int> group;
  for (int n = 0; n < count; ++n) {
    group.push_back(rank_of(coords));
    for (int k = static_cast<int>(indices.size()) - 1; k >= 0; --k) {
      if (++coords[indices[k]] < axes_[indices[k]].size) break;
      coords[indices[k]] = 0;
    }
  }
  return group;
}

std::vector<std::vector<int>> MeshLayout::groups(const std::vector<std::string>& axes) const {
  const std::vector<int> indices = axis_indices(axes);
  std::vector<std::vector<int>> out;
  for (int rank = 0; rank < size_; ++rank) {
    const std::vector<int> coords = coordinates(rank);
    // A group is listed once, at its first member: the rank with zeros on the group's axes.
    if (std::all_of(indices.begin(), indices.end(), [&](int i) { return coords[i] == 0; }))
      out.push_back(group_of(rank, axes));
  }
  return out;
}

int MeshLayout::group_rank(int rank, const std::vector<std::string>& axes) const {
  const std::vector<int> indices = axis_indices(axes);
  const std::vector<int> coords = coordinates(rank);
  int position = 0;
  for (int i : indices) position = position * axes_[i].size + coords[i];
  return position;
}

std::pair<int, int> MeshLayout::group_bounds(int rank, const std::vector<std::string>& axes) const {
  std::vector<int> lowest = coordinates(rank), highest = lowest;
  for (int i : axis_indices(axes)) {
    lowest[i] = 0;
    highest[i] = axes_[i].size - 1;
  }
  return {rank_of(lowest), rank_of(highest)};
}

MeshLayout MeshLayout::sub_layout(const std::vector<std::string>& axes) const {
  std::vector<MeshAxis> sub;
  for (int i : axis_indices(axes)) sub.push_back(axes_[i]);
  return MeshLayout(std::move(sub));
}

std::string MeshLayout::to_string() const {
  std::string out;
  for (const auto& a : axes_) out += detail::concat(out.empty() ? "" : ",", a.name, "=", a.size);
  return out.empty() ? "(no axes)" : out;
}

MeshLayout parse_mesh_spec(std::string_view spec) {
  const std::string example = "; expected name=size items separated by commas, e.g. "
                              "'pp=2,dp_shard=2,tp=2'";
  if (trim(spec).empty()) throw InvalidArgument("empty mesh spec" + example);
  std::vector<MeshAxis> axes;
  while (true) {
    const size_t comma = spec.find(',');
    const std::string_view item = trim(spec.substr(0, comma));
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos)
      throw InvalidArgument("mesh spec item '" + std::string(item) + "' has no '='" + example);
    const std::string name(trim(item.substr(0, eq)));
    const std::string_view value = trim(item.substr(eq + 1));
    const std::optional<int> size = parse_integer<int>(value);
    if (!size)
      throw InvalidArgument("mesh spec item '" + std::string(item) + "': size '" +
                            std::string(value) + "' is not an integer" + example);
    axes.push_back({name, *size});
    if (comma == std::string_view::npos) break;
    spec.remove_prefix(comma + 1);
  }
  return MeshLayout(std::move(axes));
}

}  // namespace meshtrain
