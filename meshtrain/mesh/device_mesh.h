// DeviceMesh: the ranks of the world communicator arranged as a MeshLayout, with one communicator
// per axis, flattened axes and sub-meshes (as in DeviceMesh of torch.distributed).
//
// Communicators are created collectively over the world communicator, so every rank must build
// the same mesh and call flatten() with the same arguments in the same order (SPMD). The
// constructor creates them eagerly in a fixed order: one per mesh axis in mesh order, then "dp",
// the data axes dp_replicate and dp_shard flattened (those present; with neither, "dp" has size 1).
// Sub-meshes share the communicators of the mesh they come from and stay valid as long as any
// mesh or sub-mesh built from the same constructor call does. The world communicator must outlive
// them all.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "meshtrain/core/comm/communicator.h"
#include "meshtrain/mesh/mesh_layout.h"

namespace meshtrain {

class DeviceMesh {
 public:
  // Throws InvalidArgument unless layout.size() equals world.size().
  DeviceMesh(Communicator& world, MeshLayout layout);
  DeviceMesh(Communicator& world, std::vector<MeshAxis> axes)
      : DeviceMesh(world, MeshLayout(std::move(axes))) {}

  // The shape of this (sub-)mesh and this rank's place in it.
  const MeshLayout& layout() const { return layout_; }
  int size() const { return layout_.size(); }
  int rank() const { return rank_; }  // index in this (sub-)mesh; the world rank for the root mesh
  int world_rank() const;
  // The world communicator the mesh was built over (metrics and mesh-wide sums use it, so that
  // the strategies' per-axis counters stay exact).
  Communicator& world() const { return *shared_->world; }
  const std::vector<int>& world_ranks() const { return world_ranks_; }  // of each mesh position
  std::vector<int> coordinates() const { return layout_.coordinates(rank_); }

  // Axis queries take a mesh axis of this (sub-)mesh or a flattened axis over its axes.
  bool has_axis(std::string_view name) const;
  int axis_size(std::string_view name) const;
  int axis_rank(std::string_view name) const;              // this rank's index along the axis
  std::vector<int> axis_group(std::string_view name) const;  // world ranks, in axis order
  Communicator& comm(std::string_view name) const;

  // Collective over the world communicator: adds the axis `name` over `axes` (axes of this mesh,
  // in mesh order), with its own communicator. The name must be new and not a mesh axis name.
  void flatten(const std::string& name, const std::vector<std::string>& axes);

  // The mesh of the given axes (in mesh order) that contains this rank. Not collective.
  DeviceMesh sub_mesh(const std::vector<std::string>& axes) const;

  // The bytes this rank has sent so far on each axis's group of the root mesh and on "dp", in
  // mesh order with "dp" last, as the communicators count them: the strategies' traffic (the
  // world communicator's own exchanges are not counted).
  std::vector<std::pair<std::string, uint64_t>> bytes_sent_by_group() const;
  // The calls this rank has made so far on the same groups, in the same order.
  std::vector<std::pair<std::string, uint64_t>> calls_by_group() const;
  // Each of those groups' counters whole (bytes and calls per op kind), in the same order.
  std::vector<std::pair<std::string, CommCounters>> counters_by_group() const;

  std::string to_string() const;  // "mesh pp=2,tp=2 at rank 3 (world rank 3), coordinates (1, 1)"

 private:
  // `count` of each group's counters, in bytes_sent_by_group's order.
  std::vector<std::pair<std::string, uint64_t>> counted_by_group(
      const std::function<uint64_t(const CommCounters&)>& count) const;

  struct Shared {
    Communicator* world;
    MeshLayout root;
    std::map<std::string, std::vector<std::string>, std::less<>> flattened;  // name -> axes
    std::map<std::string, std::unique_ptr<Communicator>, std::less<>> comms;
  };

  DeviceMesh(std::shared_ptr<Shared> shared, MeshLayout layout);
  // The mesh axes that `name` spans; throws naming the available axes when it is not visible.
  std::vector<std::string> resolve(std::string_view name) const;
  void add_communicator(const std::string& name, const std::vector<std::string>& axes);

  std::shared_ptr<Shared> shared_;
  MeshLayout layout_;
  std::vector<int> world_ranks_;
  int rank_ = 0;
};

}  // namespace meshtrain
