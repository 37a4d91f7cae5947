// The shared state of one group of the local backend: collective slots indexed by sequence number
// and the send/recv mailbox. All waits go through one condition variable per group, have a
// deadline, and wake when the group fails or the world aborts.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "core/comm/local/op_signature.h"
#include "core/comm/work.h"
#include "core/tensor.h"

namespace meshtrain::local {

class WorldState;

// Who waits, for the messages of timeouts.
struct WaitContext {
  int rank = 0;
  int world_rank = 0;
  CommOp op = CommOp::barrier;
  uint64_t seq = 0;  // collective number in the group, or send/recv number on the pair
  int peer = -1;     // send/recv only
  std::chrono::milliseconds timeout{0};
};

// One rank's buffers in a slot. The slot holds the handles, so peers can read them safely even
// if their owner has already failed and let go.
struct Post {
  Tensor in;
  Tensor out;  // all_reduce, broadcast: the buffer (in is the same)
};

struct Slot {
  OpSignature signature;
  int first_rank = 0;           // whose signature the others are checked against
  std::vector<Post> posts;      // by rank
  std::vector<int> reached;     // by rank: phases passed
  std::vector<int> phase_done;  // by phase: ranks that passed it
};

class GroupState {
 public:
  GroupState(const WorldState& world, uint64_t id, std::string name, std::vector<int> world_ranks);

  uint64_t id() const { return id_; }
  const std::string& name() const { return name_; }
  const std::vector<int>& world_ranks() const { return world_ranks_; }
  int size() const { return static_cast<int>(world_ranks_.size()); }

  // Posts this rank's buffers in slot ctx.seq and waits until every rank has posted. A rank whose
  // signature differs from the first poster's fails the whole group with a message naming both.
  std::shared_ptr<Slot> arrive(const WaitContext& ctx, const OpSignature& signature, Post post);
  // Waits until every rank has passed this rank's next phase; the last phase releases the slot.
  void sync(const WaitContext& ctx, Slot& slot);

  // Eager send: queues the buffer on the (src, dst) pair; the matching recv copies it and
  // completes work. Recv waits for the send with the same number and checks size and dtype.
  void post_send(const WaitContext& ctx, int src, int dst, Tensor buffer,
                 std::shared_ptr<AsyncWork> work);
  void recv(const WaitContext& ctx, int src, int dst, const Tensor& buffer);

  // Fails every pending and future op of the group with PeerFailure(message); the first wins.
  void fail(const std::string& message);
  // Called by the world after an abort: wakes every wait so it throws.
  void wake_after_abort();

 private:
  using Clock = std::chrono::steady_clock;
  using SendKey = std::tuple<int, int, uint64_t>;  // src, dst, number
  struct PendingSend {
    Tensor buffer;
    std::shared_ptr<AsyncWork> work;
  };

  void throw_if_failed_locked(const WaitContext& ctx) const;
  void fail_locked(const std::string& message);
  void release_locked(const std::string& message);
  void pass_phase_locked(const WaitContext& ctx, Slot& slot);
  // Waits until ready(); on a deadline fails the group (nobody waits for a rank that gave up)
  // and throws Timeout with what missing() describes.
  void wait_locked(std::unique_lock<std::mutex>& lock, const WaitContext& ctx,
                   const std::function<bool()>& ready,
                   const std::function<std::string()>& missing);
  std::string where(const WaitContext& ctx) const;

  const WorldState& world_;
  const uint64_t id_;
  const std::string name_;
  const std::vector<int> world_ranks_;

  std::mutex mutex_;
  std::condition_variable cv_;
  std::string failure_;  // empty while healthy
  std::map<uint64_t, std::shared_ptr<Slot>> slots_;
  std::map<SendKey, PendingSend> sends_;
};

}  // namespace meshtrain::local
