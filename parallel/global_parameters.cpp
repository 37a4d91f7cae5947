#include "parallel/global_parameters.h"

#include <algorithm>

#include "core/error.h"
#include "mesh/axis_names.h"
#include "mesh/layout_copy.h"

namespace meshtrain {

namespace {
// The global tensor from the tp group's pieces; each rank's piece is padded to the largest so the
// gather is one flat all-gather.
Tensor gather_over_tp(const Parameter& p, const Tensor& piece, const DeviceMesh& mesh) {
  MemoryCategoryScope scope(MemoryCategory::comm);
  const std::vector<int> peers = mesh.axis_group(mesh_axis::tp);
  int64_t padded = 0;
  for (int peer : peers)
    padded = std::max(padded, shape_numel(p.layout().local_shape(p.global_shape(), mesh.layout(), peer)));
  const Tensor host = piece.device().is_cpu() ? piece : piece.to(Device::cpu());
  Tensor send = Tensor::zeros({padded}, DType::f32);
  if (host.numel() > 0) send.view(0, {host.numel()}).copy_from(host.flatten());
  Tensor gathered = Tensor::empty({padded * static_cast<int64_t>(peers.size())}, DType::f32);
  mesh.comm(mesh_axis::tp).all_gather_into(gathered, send)->wait();

  Tensor global = Tensor::empty(p.global_shape(), DType::f32);
  for (size_t i = 0; i < peers.size(); ++i) {
    const Shape shape = p.layout().local_shape(p.global_shape(), mesh.layout(), peers[i]);
    copy_local_to_global(global, gathered.view(static_cast<int64_t>(i) * padded, shape),
                         p.layout().local_pieces(p.global_shape(), mesh.layout(), peers[i]));
  }
  return global;
}
}  // namespace

void for_each_global_parameter(TrainableState& state, const DeviceMesh& mesh,
                               const ParameterVisitor& fn) {
  state.for_each_compute_value([&](const Parameter& p, const Tensor& value) {
    MT_CHECK(value.dtype() == DType::f32, "parameter '", p.name(),
             "': global values are assembled from fp32 pieces, got ", value.describe());
    if (!p.layout().shards_axis(mesh_axis::tp) || mesh.axis_size(mesh_axis::tp) == 1) {
      fn(p, value);
      return;
    }
    fn(p, gather_over_tp(p, value, mesh));
  });
}

}  // namespace meshtrain
