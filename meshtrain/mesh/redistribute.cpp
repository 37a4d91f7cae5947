#include "meshtrain/mesh/redistribute.h"

#include "meshtrain/core/error.h"
#include "meshtrain/mesh/box_copy.h"
#include "meshtrain/mesh/shard_math.h"

namespace meshtrain {

namespace {

int checked_dim(const Placement& p, const Shape& global) {
  // A blocked shard's piece is several chunks, which these single-chunk collectives do not move.
  if (p.shard_blocks() != 1)
    throw NotSupported("redistribute: " + p.to_string() + " is not supported; only shards of one "
                       "block are");
  const int dim = p.shard_dim();
  MT_CHECK(dim >= 0 && dim < static_cast<int>(global.size()), "redistribute: ", p.to_string(),
           " shards dim ", dim, ", which a tensor of shape ", shape_string(global), " lacks");
  return dim;
}

Shape with_dim(Shape shape, int dim, int64_t size) {
  shape[dim] = size;
  return shape;
}

Shape at_dim(size_t ndim, int dim, int64_t offset) {
  Shape offsets(ndim, 0);
  offsets[dim] = offset;
  return offsets;
}

// Every rank's shard padded to the chunk size, concatenated in rank order: the layout that
// all_gather_into produces and reduce_scatter_into consumes.
struct PaddedShards {
  Shape padded;    // one rank's padded shard
  int64_t numel;   // elements of one padded shard
};

PaddedShards padded_shards(const Shape& global, int dim, int parts) {
  Shape padded = with_dim(global, dim, shard_chunk(global[dim], parts));
  return {padded, shape_numel(padded)};
}

Tensor all_gather_shards(const Tensor& local, const Shape& global, int dim, Communicator& comm) {
  const int w = comm.size();
  const PaddedShards p = padded_shards(global, dim, w);
  Tensor send = Tensor::zeros(p.padded, local.dtype());
  copy_box(send, Shape(global.size(), 0), local, Shape(global.size(), 0), local.shape());
  Tensor gathered = Tensor::empty({w * p.numel}, local.dtype());
  comm.all_gather_into(gathered, send.flatten())->wait();
  Tensor out = Tensor::empty(global, local.dtype());
  for (int j = 0; j < w; ++j) {
    const ShardRange r = shard_range(global[dim], w, j);
    copy_box(out, at_dim(global.size(), dim, r.offset), gathered.view(j * p.numel, p.padded),
             Shape(global.size(), 0), with_dim(global, dim, r.size));
  }
  return out;
}

Tensor reduce_scatter_shards(const Tensor& local, const Shape& global, int dim, ReduceOp op,
                             Communicator& comm) {
  const int w = comm.size();
  const PaddedShards p = padded_shards(global, dim, w);
  Tensor packed = Tensor::zeros({w * p.numel}, local.dtype());
  for (int j = 0; j < w; ++j) {
    const ShardRange r = shard_range(global[dim], w, j);
    copy_box(packed.view(j * p.numel, p.padded), Shape(global.size(), 0), local,
             at_dim(global.size(), dim, r.offset), with_dim(global, dim, r.size));
  }
  Tensor reduced = Tensor::empty(p.padded, local.dtype());
  comm.reduce_scatter_into(reduced.flatten(), packed, op)->wait();
  const Shape mine = local_shape(global, Shard(dim), comm);
  Tensor out = Tensor::empty(mine, local.dtype());
  copy_box(out, Shape(global.size(), 0), reduced, Shape(global.size(), 0), mine);
  return out;
}

Tensor local_chunk(const Tensor& local, const Shape& global, int dim, const Communicator& comm) {
  const ShardRange r = shard_range(global[dim], comm.size(), comm.rank());
  Tensor out = Tensor::empty(with_dim(global, dim, r.size), local.dtype());
  copy_box(out, Shape(global.size(), 0), local, at_dim(global.size(), dim, r.offset), out.shape());
  return out;
}

}  // namespace

Shape local_shape(const Shape& global_shape, const Placement& placement,
                  const Communicator& comm) {
  if (!placement.is_shard()) return global_shape;
  const int dim = checked_dim(placement, global_shape);
  return with_dim(global_shape, dim, shard_range(global_shape[dim], comm.size(), comm.rank()).size);
}

Tensor redistribute(const Tensor& local, const Shape& global_shape, const Placement& from,
                    const Placement& to, Communicator& comm) {
  const bool supported = from == to || (to.is_replicate() && !from.is_replicate()) ||
                         (to.is_shard() && !from.is_shard());
  if (!supported)
    throw NotSupported("redistribute " + from.to_string() + " -> " + to.to_string() + " on '" +
                       comm.name() + "' is not supported; supported: Shard->Replicate, "
                       "Partial->Replicate, Partial->Shard, Replicate->Shard");
  const Shape expected = local_shape(global_shape, from, comm);
  MT_CHECK(local.shape() == expected, "redistribute ", from.to_string(), " -> ", to.to_string(),
           " on '", comm.name(), "' (rank ", comm.rank(), " of ", comm.size(), "): local piece ",
           local.describe(), " should have shape ", shape_string(expected), " for global shape ",
           shape_string(global_shape));
  if (from == to) return local;
  if (from.is_shard() && to.is_replicate())
    return all_gather_shards(local, global_shape, checked_dim(from, global_shape), comm);
  if (from.is_partial() && to.is_replicate()) {
    Tensor out = local.clone();
    comm.all_reduce(out, from.reduce_op())->wait();
    return out;
  }
  if (from.is_partial() && to.is_shard())
    return reduce_scatter_shards(local, global_shape, checked_dim(to, global_shape),
                                 from.reduce_op(), comm);
  return local_chunk(local, global_shape, checked_dim(to, global_shape), comm);
}

}  // namespace meshtrain
