#include "meshtrain/mesh/device_mesh.h"

#include <algorithm>
#include <numeric>

#include "meshtrain/core/error.h"
#include "meshtrain/mesh/axis_names.h"

namespace meshtrain {

DeviceMesh::DeviceMesh(Communicator& world, MeshLayout layout) {
  layout.check_world_size(world.size());
  shared_ = std::make_shared<Shared>(Shared{&world, layout, {}, {}});
  layout_ = std::move(layout);
  rank_ = world.rank();
  for (int r = 0; r < layout_.size(); ++r) world_ranks_.push_back(r);
  // The fixed order of communicator creation that every rank follows.
  for (const auto& axis : layout_.axis_names()) add_communicator(axis, {axis});
  // "dp" numbers its ranks as MeshLayout::span_coordinate does, so layouts over "dp" agree with it.
  const std::string dp(mesh_axis::dp);
  shared_->flattened[dp] = layout_.span(dp);
  add_communicator(dp, shared_->flattened[dp]);
}

DeviceMesh::DeviceMesh(std::shared_ptr<Shared> shared, MeshLayout layout)
    : shared_(std::move(shared)), layout_(std::move(layout)) {
  const std::vector<std::string> axes = layout_.axis_names();
  world_ranks_ = shared_->root.group_of(world_rank(), axes);
  rank_ = shared_->root.group_rank(world_rank(), axes);
}

int DeviceMesh::world_rank() const { return shared_->world->rank(); }

std::vector<std::string> DeviceMesh::resolve(std::string_view name) const {
  if (layout_.has_axis(name)) return {std::string(name)};
  const auto it = shared_->flattened.find(name);
  const auto visible = [&](const std::vector<std::string>& axes) {
    return std::all_of(axes.begin(), axes.end(), [&](const auto& a) { return layout_.has_axis(a); });
  };
  if (it != shared_->flattened.end() && visible(it->second)) return it->second;
  std::string known;
  for (const auto& a : layout_.axis_names()) known += (known.empty() ? "" : ", ") + a;
  for (const auto& [flat, axes] : shared_->flattened)
    if (visible(axes)) known += (known.empty() ? "" : ", ") + flat;
  throw InvalidArgument(detail::concat("mesh ", layout_.to_string(), " has no axis '", name,
                                       "'; its axes are ", known));
}

bool DeviceMesh::has_axis(std::string_view name) const {
  try {
    resolve(name);
    return true;
  } catch (const InvalidArgument&) {
    return false;
  }
}

int DeviceMesh::axis_size(std::string_view name) const {
  int size = 1;
  for (const auto& axis : resolve(name)) size *= shared_->root.axis_size(axis);
  return size;
}

int DeviceMesh::axis_rank(std::string_view name) const {
  return shared_->root.group_rank(world_rank(), resolve(name));
}

std::vector<int> DeviceMesh::axis_group(std::string_view name) const {
  return shared_->root.group_of(world_rank(), resolve(name));
}

Communicator& DeviceMesh::comm(std::string_view name) const {
  resolve(name);
  return *shared_->comms.find(name)->second;
}

void DeviceMesh::flatten(const std::string& name, const std::vector<std::string>& axes) {
  MT_CHECK(!axes.empty(), "flatten('", name, "'): no axes given");
  const auto& known = canonical_mesh_axes();
  MT_CHECK(std::find(known.begin(), known.end(), name) == known.end() &&
               !shared_->flattened.contains(name),
           "flatten: the name '", name, "' is already taken");
  layout_.sub_layout(axes);  // checks the axes belong to this mesh, in mesh order
  shared_->flattened[name] = axes;
  add_communicator(name, axes);
}

DeviceMesh DeviceMesh::sub_mesh(const std::vector<std::string>& axes) const {
  return DeviceMesh(shared_, layout_.sub_layout(axes));
}

std::vector<std::pair<std::string, CommCounters>> DeviceMesh::counters_by_group() const {
  std::vector<std::pair<std::string, CommCounters>> out;
  for (const MeshAxis& axis : shared_->root.axes())
    out.emplace_back(axis.name, shared_->comms.at(axis.name)->counters());
  out.emplace_back(mesh_axis::dp, shared_->comms.at(std::string(mesh_axis::dp))->counters());
  return out;
}

std::vector<std::pair<std::string, uint64_t>> DeviceMesh::counted_by_group(
    const std::function<uint64_t(const CommCounters&)>& count) const {
  std::vector<std::pair<std::string, uint64_t>> out;
  for (const auto& [group, counters] : counters_by_group())
    out.emplace_back(group, count(counters));
  return out;
}

std::vector<std::pair<std::string, uint64_t>> DeviceMesh::bytes_sent_by_group() const {
  return counted_by_group([](const CommCounters& c) { return c.total_sent(); });
}

std::vector<std::pair<std::string, uint64_t>> DeviceMesh::calls_by_group() const {
  return counted_by_group([](const CommCounters& c) {
    return std::accumulate(c.calls.begin(), c.calls.end(), uint64_t{0});
  });
}

void DeviceMesh::add_communicator(const std::string& name, const std::vector<std::string>& axes) {
  const std::vector<int> group = shared_->root.group_of(world_rank(), axes);
  shared_->comms[name] = shared_->world->split_group(group, name);
}

std::string DeviceMesh::to_string() const {
  std::string coords;
  for (int c : coordinates()) coords += detail::concat(coords.empty() ? "" : ", ", c);
  return detail::concat("mesh ", layout_.to_string(), " at rank ", rank_, " (world rank ",
                        world_rank(), "), coordinates (", coords, ")");
}

}  // namespace meshtrain
