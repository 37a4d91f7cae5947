// LocalWorld: N ranks as threads of one process, communicating through shared memory. Create one
// world, then one communicator per rank (each on the thread that runs the rank).
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "meshtrain/core/comm/communicator.h"
#include "meshtrain/core/comm/local/peer_failure.h"

namespace meshtrain {

namespace local {
class WorldState;
class GroupState;
}  // namespace local

class LocalWorld {
 public:
  explicit LocalWorld(int world_size, CommOptions options = {});
  ~LocalWorld();
  LocalWorld(const LocalWorld&) = delete;
  LocalWorld& operator=(const LocalWorld&) = delete;

  int size() const { return world_size_; }

  // The world communicator (group "world") of one rank; once per rank. Its progress thread
  // charges the MemoryTracker bound to the calling thread. It may outlive the LocalWorld.
  std::unique_ptr<Communicator> communicator(int rank);

  // Makes every pending and future wait of every rank, in every group, throw
  // PeerFailure (a CommError) "rank R failed: reason". The first abort wins.
  void abort(int rank, const std::string& reason);

 private:
  const int world_size_;
  const CommOptions options_;
  std::shared_ptr<local::WorldState> state_;
  std::shared_ptr<local::GroupState> world_group_;
  std::mutex mutex_;
  std::vector<bool> issued_;  // by rank: communicator() already called
};

// Test hook: from now on, every collective of kind `op` (not send/recv) of the group that `comm`
// (a local communicator) belongs to completes `delay` late, on every member: whichever thread
// runs a member's op (its progress thread, or the rank waiting for it) sleeps that long after
// moving its data, before marking the op complete, so the issue is not held up but whoever waits
// for the op is, and the ops queued behind it start later. Other groups (sub-communicators
// included) are not affected. Zero removes the delay. Throws InvalidArgument when `comm` is not a
// local communicator.
void set_local_op_delay(Communicator& comm, CommOp op, std::chrono::microseconds delay);

}  // namespace meshtrain
