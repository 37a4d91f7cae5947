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

void for_each_global_parameter(TrainableState& state, const DeviceMesh& mesh, Model& model,
                               const ParameterVisitor& fn) {
  const bool pipelined = mesh.has_axis(mesh_axis::pp) && mesh.axis_size(mesh_axis::pp) > 1;
  const bool sender = pipelined && mesh.axis_rank(mesh_axis::pp) > 0;
  const std::vector<Parameter*> all = model.parameters();
  std::vector<std::pair<int32_t, Tensor>> outgoing;  // (index in `all`, global value)
  state.for_each_compute_value([&](const Parameter& p, const Tensor& value) {
    MT_CHECK(value.dtype() == DType::f32, "parameter '", p.name(),
             "': global values are assembled from fp32 pieces, got ", value.describe());
    const bool tp_split = p.layout().shards_axis(mesh_axis::tp) && mesh.axis_size(mesh_axis::tp) > 1;
    const Tensor global = tp_split ? gather_over_tp(p, value, mesh) : value;
    fn(p, global);
    if (sender && !p.tied_copy()) {
      const auto at = std::find(all.begin(), all.end(), &p);
      MT_CHECK(at != all.end(), "parameter '", p.name(), "' is not one of the model's");
      outgoing.push_back({static_cast<int32_t>(at - all.begin()), global.clone()});
    }
  });
  if (!pipelined) return;

  // The other stages' parameters reach pp rank 0: a count, then (index, value) pairs in turn.
  Communicator& pp = mesh.comm(mesh_axis::pp);
  if (sender) {
    std::vector<WorkPtr> sends;
    std::vector<Tensor> indices;
    indices.push_back(
        Tensor::from_vector(std::vector<int32_t>{static_cast<int32_t>(outgoing.size())}, {1}));
    sends.push_back(pp.send(indices.back(), 0));
    for (const auto& [index, value] : outgoing) {
      indices.push_back(Tensor::from_vector(std::vector<int32_t>{index}, {1}));
      sends.push_back(pp.send(indices.back(), 0));
      sends.push_back(pp.send(value, 0));
    }
    for (const WorkPtr& w : sends) w->wait();
    return;
  }
  for (int peer = 1; peer < pp.size(); ++peer) {
    const Tensor count = Tensor::empty({1}, DType::i32);
    pp.recv(count, peer)->wait();
    for (int32_t i = 0; i < count.data<int32_t>()[0]; ++i) {
      const Tensor index = Tensor::empty({1}, DType::i32);
      pp.recv(index, peer)->wait();
      const int32_t at = index.data<int32_t>()[0];
      MT_CHECK(at >= 0 && at < static_cast<int32_t>(all.size()), "pp rank ", peer,
               " sent parameter index ", at, " of ", all.size());
      const Parameter& p = *all[at];
      const Tensor value = Tensor::empty(p.global_shape());
      pp.recv(value, peer)->wait();
      fn(p, value);
    }
  }
}

}  // namespace meshtrain
