// Mapping a mesh onto a Topology: which GPU each mesh rank runs on, chosen so that the axes that
// communicate most sit on the fastest links, and a report of each axis' bottleneck bandwidth.
//
// The GPUs are taken in Topology::locality_order() (fastest islands contiguous) and filled with
// the mesh ranks counted with the highest-priority axis fastest, so a tp group fills one NVLink
// island before dp_shard spreads over islands, and so on.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "meshtrain/mesh/mesh_layout.h"
#include "meshtrain/mesh/topology.h"

namespace meshtrain {

// Most communication first: tp (collectives inside every layer), dp_shard (an all-gather and a
// reduce-scatter per unit), dp_replicate (one all-reduce per step), pp (point-to-point only).
const std::vector<std::string>& default_axis_priority();

// device_of_rank[r] is the GPU (Topology numbering) of mesh rank r. priority must name every axis
// of the mesh; names the mesh does not have are skipped. Needs mesh.size() <= num_gpus().
std::vector<int> map_mesh_to_devices(const MeshLayout& mesh, const Topology& topology,
                                     const std::vector<std::string>& priority =
                                         default_axis_priority());

// The bottleneck of the groups over `axes`: the minimum over the groups, and over consecutive
// members of each group taken as a ring (the last member's neighbour is the first), of the
// widest-path bandwidth between their GPUs. nullopt when the groups have a single member.
std::optional<PathBottleneck> group_bottleneck(const Topology& topology, const MeshLayout& mesh,
                                               const std::vector<int>& device_of_rank,
                                               const std::vector<std::string>& axes);

struct AxisBandwidth {
  std::string axis;
  int size = 1;
  std::optional<PathBottleneck> bottleneck;  // nullopt for a size-1 axis
};

struct MeshMapping {
  std::vector<int> device_of_rank;
  std::vector<AxisBandwidth> axes;  // each mesh axis, in mesh order
  // One line per axis: "tp (size 8): 450 GB/s over nvlink", "pp (size 1): no communication".
  std::string report() const;
};

MeshMapping map_mesh(const MeshLayout& mesh, const Topology& topology,
                     const std::vector<std::string>& priority = default_axis_priority());

}  // namespace meshtrain
