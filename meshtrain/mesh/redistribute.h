// Redistribution of a tensor between two placements on one mesh axis, over that axis'
// communicator (DTensor's 1-D rules):
//   Shard(d)  -> Replicate   all-gather (short shards padded to the ceil-div chunk)
//   Partial   -> Replicate   all-reduce with the Partial's op
//   Partial   -> Shard(d)    reduce-scatter with the Partial's op (padded likewise)
//   Replicate -> Shard(d)    take the local chunk, no communication
//   p         -> p           the input itself
// Other pairs, and blocked shards (Shard(d, blocks) with blocks > 1), throw NotSupported. Collective: every rank of the axis calls it with the same
// placements and global shape. Host tensors (the local and mpi backends).
#pragma once

#include "meshtrain/core/comm/communicator.h"
#include "meshtrain/core/tensor.h"
#include "meshtrain/mesh/placement.h"

namespace meshtrain {

// The shape of comm.rank()'s piece of a tensor of `global_shape` placed as `placement` on comm.
Shape local_shape(const Shape& global_shape, const Placement& placement, const Communicator& comm);

// `local` is this rank's piece under `from` of a tensor whose shape over this axis is
// `global_shape`; returns the piece under `to` (a new tensor, unless from == to). Waits for the
// collective to complete.
Tensor redistribute(const Tensor& local, const Shape& global_shape, const Placement& from,
                    const Placement& to, Communicator& comm);

}  // namespace meshtrain
