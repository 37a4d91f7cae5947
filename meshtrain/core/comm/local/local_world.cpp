#include "meshtrain/core/comm/local/local_world.h"

#include <numeric>

#include "meshtrain/core/comm/local/local_communicator.h"
#include "meshtrain/core/error.h"

namespace meshtrain {

namespace {
std::vector<int> iota_ranks(int n) {
  std::vector<int> ranks(n);
  std::iota(ranks.begin(), ranks.end(), 0);
  return ranks;
}
}  // namespace

LocalWorld::LocalWorld(int world_size, CommOptions options)
    : world_size_(world_size), options_(options) {
  MT_CHECK(world_size >= 1, "a LocalWorld needs at least one rank, got ", world_size);
  MT_CHECK(options.timeout.count() > 0, "CommOptions::timeout must be positive, got ",
           options.timeout.count(), " ms");
  state_ = std::make_shared<local::WorldState>();
  world_group_ = state_->make_group("world", iota_ranks(world_size));
  issued_.assign(world_size, false);
}

LocalWorld::~LocalWorld() = default;

std::unique_ptr<Communicator> LocalWorld::communicator(int rank) {
  MT_CHECK(rank >= 0 && rank < world_size_, "rank ", rank, " outside a local world of ",
           world_size_);
  {
    std::lock_guard lock(mutex_);
    MT_CHECK(!issued_[rank], "the communicator of rank ", rank, " was already created");
    issued_[rank] = true;
  }
  return std::make_unique<local::LocalCommunicator>(state_, world_group_, rank, options_,
                                                    current_memory_tracker());
}

void LocalWorld::abort(int rank, const std::string& reason) { state_->abort(rank, reason); }

void set_local_op_delay(Communicator& comm, CommOp op, std::chrono::microseconds delay) {
  auto* local = dynamic_cast<local::LocalCommunicator*>(&comm);
  MT_CHECK(local != nullptr, "set_local_op_delay: group '", comm.name(), "' is on the ",
           comm.backend_name(), " backend, not local");
  MT_CHECK(delay.count() >= 0, "set_local_op_delay: the delay must not be negative, got ",
           delay.count(), " us");
  local->group_state().set_op_delay(op, delay);
}

}  // namespace meshtrain
