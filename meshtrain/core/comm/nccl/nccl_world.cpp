#include "meshtrain/core/comm/nccl/nccl_world.h"

#include <cstring>
#include <numeric>

#include "meshtrain/core/comm/nccl/nccl_check.h"
#include "meshtrain/core/comm/nccl/nccl_communicator.h"
#include "meshtrain/core/device_memory.h"
#include "meshtrain/core/error.h"

namespace meshtrain {

namespace {
const std::string kUniqueIdKey = "meshtrain/nccl/world/unique_id";

ncclUniqueId share_unique_id(Store& store, int rank, std::chrono::milliseconds timeout) {
  ncclUniqueId id;
  if (rank == 0) {
    nccl::check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    const auto* bytes = reinterpret_cast<const uint8_t*>(id.internal);
    store.set(kUniqueIdKey, std::vector<uint8_t>(bytes, bytes + sizeof id.internal));
    return id;
  }
  const std::vector<uint8_t> value = store.get(kUniqueIdKey, timeout);
  if (value.size() != sizeof id.internal)
    throw CommError(detail::concat("nccl_world: store key '", kUniqueIdKey, "' holds ",
                                   value.size(), " bytes, expected an NCCL unique id of ",
                                   sizeof id.internal));
  std::memcpy(id.internal, value.data(), value.size());
  return id;
}
}  // namespace

std::unique_ptr<Communicator> nccl_world(Store& store, int rank, int world_size, int device_index,
                                         CommOptions options) {
  MT_CHECK(world_size >= 1, "nccl_world: the world size must be at least 1, got ", world_size);
  MT_CHECK(rank >= 0 && rank < world_size, "nccl_world: rank ", rank, " outside a world of ",
           world_size);
  const int devices = cuda_device_count();
  MT_CHECK(device_index >= 0 && device_index < devices, "nccl_world: rank ", rank,
           " asks for cuda:", device_index, " but ", devices, " CUDA devices are visible");
  nccl::check_cuda(cudaSetDevice(device_index), "cudaSetDevice");

  const ncclUniqueId id = share_unique_id(store, rank, options.timeout);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // NCCL never blocks: every wait polls with a deadline
  ncclComm_t comm = nullptr;
  const std::string what = detail::concat("nccl_world: initialising rank ", rank, " of ",
                                          world_size, " on cuda:", device_index);
  const ncclResult_t started = ncclCommInitRankConfig(&comm, world_size, id, rank, &config);
  if (started != ncclSuccess && started != ncclInProgress) {
    if (comm) ncclCommAbort(comm);
    nccl::check_nccl(started, what);
  }
  auto context = std::make_shared<nccl::NcclContext>(comm, device_index, options.timeout);
  context->wait_ready(what, options.timeout);

  std::vector<int> world_ranks(world_size);
  std::iota(world_ranks.begin(), world_ranks.end(), 0);
  return std::make_unique<nccl::NcclCommunicator>(std::move(context), rank, std::move(world_ranks),
                                                  "world", options);
}

}  // namespace meshtrain
