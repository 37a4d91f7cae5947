// The shared state of one group of the local backend: collective slots indexed by sequence number
// and the point-to-point mailbox. All waits go through one condition variable per group, have a
// deadline (but a failed rank's wait for a move under way, a bounded local copy:
// arrive_last_moves), and wake when the group fails or the world aborts; point-to-point never
// waits here (see mailbox.h).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "meshtrain/core/comm/local/mailbox.h"
#include "meshtrain/core/comm/local/op_signature.h"
#include "meshtrain/core/comm/local/stream_mark.h"
#include "meshtrain/core/comm/work.h"
#include "meshtrain/core/tensor.h"

namespace meshtrain::local {

class WorldState;

// Who waits, for the messages of timeouts.
struct WaitContext {
  int rank = 0;
  int world_rank = 0;
  CommOp op = CommOp::barrier;
  uint64_t seq = 0;  // collective number in the group
  std::chrono::milliseconds timeout{0};
};

// One rank's buffers in a slot. The slot holds the handles, so peers can read them safely even
// if their owner has already failed and let go.
struct Post {
  Tensor in;
  Tensor out;  // all_reduce, broadcast: the buffer (in is the same)
  // CUDA buffers: where the owner's stream stood when it issued the op; every copy that reads or
  // writes these buffers waits for it.
  std::shared_ptr<const StreamMark> issued;
};

struct Slot {
  OpSignature signature;
  int first_rank = 0;           // whose signature the others are checked against
  std::vector<Post> posts;      // by rank
  std::vector<int> reached;     // by rank: phases passed
  std::vector<int> phase_done;  // by phase: ranks that passed it
  bool moving = false;          // last_rank_moves: the last rank is writing the outputs, unlocked
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
  // For an op whose last rank moves every rank's data (last_rank_moves): posts this
  // rank's buffers in slot ctx.seq; the last rank to post runs move_all and releases the slot,
  // the others wait until it has. A failure of move_all leaves the slot for the caller to fail
  // the group with, which wakes the others. A rank whose wait fails still waits for a move under
  // way to end before it throws, so that nothing writes its buffers once its op has failed.
  void arrive_last_moves(const WaitContext& ctx, const OpSignature& signature, Post post,
                         const std::function<void(const Slot&)>& move_all);

  // Sends and receives; a mismatched pair fails the group, and a failed group fails the mailbox.
  Mailbox& mailbox() { return mailbox_; }

  // Test hook (set_local_op_delay): how long each member's progress thread holds back the
  // completion of every collective of kind `op` of this group, after moving its data.
  void set_op_delay(CommOp op, std::chrono::microseconds delay) {
    op_delay_us_[static_cast<size_t>(op)].store(delay.count(), std::memory_order_relaxed);
  }
  std::chrono::microseconds op_delay(CommOp op) const {
    return std::chrono::microseconds(
        op_delay_us_[static_cast<size_t>(op)].load(std::memory_order_relaxed));
  }

  // Fails every pending and future op of the group with PeerFailure(message); the first wins.
  void fail(const std::string& message);
  // Called by the world after an abort: wakes every wait so it throws.
  void wake_after_abort();

 private:
  void throw_if_failed_locked(const WaitContext& ctx) const;
  void fail_locked(const std::string& message);
  void release_locked(const std::string& message);
  void pass_phase_locked(const WaitContext& ctx, Slot& slot);
  // Posts into slot ctx.seq, made on the first post; a signature unlike the first fails the group.
  std::shared_ptr<Slot> post_locked(const WaitContext& ctx, const OpSignature& signature,
                                    Post post);
  std::string absent_locked(const Slot& slot) const;  // "ranks 1, 3 never arrived"
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
  Mailbox mailbox_;  // has its own lock, always taken after mutex_ when both are held
  std::array<std::atomic<int64_t>, kNumCommOps> op_delay_us_{};
};

}  // namespace meshtrain::local
