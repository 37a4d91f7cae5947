#include "meshtrain/mesh/mesh_mapping.h"

#include <algorithm>

#include "meshtrain/core/error.h"
#include "meshtrain/mesh/axis_names.h"

namespace meshtrain {

const std::vector<std::string>& default_axis_priority() {
  static const std::vector<std::string> priority{
      std::string(mesh_axis::tp), std::string(mesh_axis::dp_shard),
      std::string(mesh_axis::dp_replicate), std::string(mesh_axis::pp)};
  return priority;
}

std::vector<int> map_mesh_to_devices(const MeshLayout& mesh, const Topology& topology,
                                     const std::vector<std::string>& priority) {
  topology.validate();
  if (mesh.size() > topology.num_gpus())
    throw InvalidArgument(detail::concat("mesh ", mesh.to_string(), " of ", mesh.size(),
                                         " ranks needs ", mesh.size(),
                                         " GPUs; the topology has ", topology.num_gpus()));
  // Mesh axes from lowest to highest priority: the order in which ranks are counted onto GPUs.
  std::vector<int> fill;
  for (auto it = priority.rbegin(); it != priority.rend(); ++it) {
    if (std::count(priority.begin(), priority.end(), *it) > 1)
      throw InvalidArgument("the axis priority list names axis '" + *it + "' twice");
    if (mesh.has_axis(*it)) fill.push_back(mesh.axis_index(*it));
  }
  for (const auto& axis : mesh.axes())
    if (std::find(priority.begin(), priority.end(), axis.name) == priority.end())
      throw InvalidArgument("the axis priority list does not name mesh axis '" + axis.name + "'");

  const std::vector<int> order = topology.locality_order();
  std::vector<int> device_of_rank(mesh.size());
  for (int rank = 0; rank < mesh.size(); ++rank) {
    const std::vector<int> coords = mesh.coordinates(rank);
    int slot = 0;
    for (int axis : fill) slot = slot * mesh.axes()[axis].size + coords[axis];
    device_of_rank[rank] = order[slot];
  }
  return device_of_rank;
}

std::optional<PathBottleneck> group_bottleneck(const Topology& topology, const MeshLayout& mesh,
                                               const std::vector<int>& device_of_rank,
                                               const std::vector<std::string>& axes) {
  MT_CHECK(static_cast<int>(device_of_rank.size()) == mesh.size(),
           "device_of_rank must name a GPU for every rank of mesh ", mesh.to_string(),
           ": expected ", mesh.size(), " entries, got ", device_of_rank.size());
  std::optional<PathBottleneck> worst;
  for (const auto& group : mesh.groups(axes)) {
    if (group.size() < 2) continue;
    for (size_t i = 0; i < group.size(); ++i) {
      const int next = group[(i + 1) % group.size()];
      const PathBottleneck b = topology.bottleneck(device_of_rank[group[i]], device_of_rank[next]);
      if (!worst || b.gb_s < worst->gb_s) worst = b;
    }
  }
  return worst;
}

MeshMapping map_mesh(const MeshLayout& mesh, const Topology& topology,
                     const std::vector<std::string>& priority) {
  MeshMapping mapping;
  mapping.device_of_rank = map_mesh_to_devices(mesh, topology, priority);
  for (const auto& axis : mesh.axes())
    mapping.axes.push_back({axis.name, axis.size,
                            group_bottleneck(topology, mesh, mapping.device_of_rank, {axis.name})});
  return mapping;
}

std::string MeshMapping::report() const {
  std::string out;
  for (const auto& a : axes) {
    out += detail::concat(a.axis, " (size ", a.size, "): ");
    out += a.bottleneck ? detail::concat(a.bottleneck->gb_s, " GB/s over ",
                                         link_kind_name(a.bottleneck->kind))
                        : std::string("no communication");
    out += "\n";
  }
  return out;
}

}  // namespace meshtrain
