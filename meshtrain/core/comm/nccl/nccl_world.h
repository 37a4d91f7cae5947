// The nccl backend: collectives between GPU buffers (cuda:N), one process or thread per GPU.
// Each communicator runs its ops on its own CUDA stream, after the work queued on the calling
// thread's stream (cudaStreamPerThread); Work::wait() orders that stream after the op.
// Defined only in builds with MESHTRAIN_HAS_NCCL.
#pragma once

#include <memory>

#include "meshtrain/core/comm/communicator.h"
#include "meshtrain/core/comm/store.h"

namespace meshtrain {

// Collective over world_size ranks: rank 0 publishes NCCL's unique id in the store and every rank
// joins within options.timeout, on GPU device_index (distinct GPUs: NCCL cannot place two ranks
// of one communicator on the same GPU). The key is fixed, so a store serves one world.
std::unique_ptr<Communicator> nccl_world(Store& store, int rank, int world_size, int device_index,
                                         CommOptions options = {});

}  // namespace meshtrain
