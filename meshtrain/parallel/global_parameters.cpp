#include "meshtrain/parallel/global_parameters.h"

#include <map>

#include "meshtrain/core/comm/gather_values.h"
#include "meshtrain/core/error.h"
#include "meshtrain/mesh/layout_copy.h"
#include "meshtrain/parallel/grad_norm.h"
#include "meshtrain/parallel/slot_pieces.h"

namespace meshtrain {

namespace {

// One slice a rank owns: which parameter, its local shape and where its pieces sit.
struct SliceInfo {
  uint64_t param = 0;
  Shape local_shape;
  std::vector<LocalPiece> pieces;
};

void put_shape(std::vector<uint64_t>& out, const Shape& shape) {
  for (int64_t v : shape) out.push_back(static_cast<uint64_t>(v));
}

Shape take_shape(const std::vector<uint64_t>& in, size_t& at, size_t dims) {
  MT_ASSERT_LE(at + dims, in.size(), "gather_parameters: a truncated slice description");
  Shape shape(in.begin() + static_cast<int64_t>(at), in.begin() + static_cast<int64_t>(at + dims));
  at += dims;
  return shape;
}

// [param, dims, local_shape, piece count, per piece: offset, shape, local offset] per slice.
std::vector<uint64_t> encode(const std::vector<SliceInfo>& slices) {
  std::vector<uint64_t> out;
  for (const SliceInfo& s : slices) {
    out.push_back(s.param);
    out.push_back(s.local_shape.size());
    put_shape(out, s.local_shape);
    out.push_back(s.pieces.size());
    for (const LocalPiece& piece : s.pieces) {
      put_shape(out, piece.global.offset);
      put_shape(out, piece.global.shape);
      put_shape(out, piece.local_offset);
    }
  }
  return out;
}

std::vector<SliceInfo> decode(const std::vector<uint64_t>& in) {
  std::vector<SliceInfo> slices;
  for (size_t at = 0; at < in.size();) {
    SliceInfo s;
    s.param = in[at++];
    const size_t dims = static_cast<size_t>(take_shape(in, at, 1)[0]);
    s.local_shape = take_shape(in, at, dims);
    const size_t pieces = static_cast<size_t>(take_shape(in, at, 1)[0]);
    for (size_t i = 0; i < pieces; ++i) {
      LocalPiece piece;
      piece.global.offset = take_shape(in, at, dims);
      piece.global.shape = take_shape(in, at, dims);
      piece.local_offset = take_shape(in, at, dims);
      s.pieces.push_back(std::move(piece));
    }
    slices.push_back(std::move(s));
  }
  return slices;
}

}  // namespace

void gather_parameters(TrainableState& state, const DeviceMesh& mesh, Model& model,
                       const ParameterVisitor& fn) {
  const std::vector<Parameter*> all = model.parameters();
  std::map<std::string, uint64_t> index_of;
  for (size_t i = 0; i < all.size(); ++i) index_of[all[i]->name()] = i;

  // This rank's owned slices, in model order (the order rank 0 receives them in).
  std::map<uint64_t, std::pair<SliceInfo, Tensor>> owned;
  for (const OptimizerSlot& slot : state.held_slots()) {
    if (!owns_slot(slot, mesh)) continue;
    const auto at = index_of.find(slot.name);
    MT_ASSERT(at != index_of.end(), "held slot '", slot.name, "' is no parameter of the model");
    SlotPieces where = slot_pieces(slot, *all[at->second], mesh);
    SliceInfo info{at->second, std::move(where.local_shape), std::move(where.pieces)};
    const Tensor host = slot.param.on(Device::cpu());
    const Tensor value = host.view(0, info.local_shape);
    owned[at->second] = {std::move(info), value};
  }
  std::vector<SliceInfo> mine;
  for (const auto& [index, entry] : owned) mine.push_back(entry.first);

  Communicator& world = mesh.world();
  // Slices travel in the memory the backend moves (a GPU's for nccl) and are assembled on the host.
  const Device via = world.exchange_device();
  const std::vector<std::vector<uint64_t>> described = all_gather_variable(world, encode(mine));
  if (world.rank() != 0) {
    std::vector<Tensor> staged;
    std::vector<WorkPtr> sends;
    for (const auto& [index, entry] : owned) {
      staged.push_back(entry.second.on(via));
      sends.push_back(world.send(staged.back(), 0));
    }
    for (const WorkPtr& w : sends) w->wait();
    return;
  }

  std::vector<std::vector<std::pair<int, SliceInfo>>> slices_of(all.size());
  for (int r = 0; r < world.size(); ++r)
    for (SliceInfo& s : decode(described[r])) {
      MT_ASSERT_LT(s.param, all.size(), "rank ", r, " describes parameter ", s.param);
      slices_of[s.param].push_back({r, std::move(s)});
    }
  for (size_t i = 0; i < all.size(); ++i) {
    const Parameter& p = *all[i];
    MemoryCategoryScope scope(MemoryCategory::other);
    const Tensor global = Tensor::empty(p.global_shape());
    int64_t covered = 0;
    for (const auto& [rank, s] : slices_of[i]) {
      Tensor local;
      if (rank == 0) {
        local = owned.at(i).second;
      } else {
        local = Tensor::empty(s.local_shape, DType::f32, via);
        world.recv(local, rank)->wait();
        local = local.on(Device::cpu());
      }
      copy_local_to_global(global, local, s.pieces);
      covered += local.numel();
    }
    MT_ASSERT_EQ(covered, shape_numel(p.global_shape()), "parameter '", p.name(),
                 "': the ranks' slices do not cover it exactly once");
    fn(p, global);
  }
}

}  // namespace meshtrain
