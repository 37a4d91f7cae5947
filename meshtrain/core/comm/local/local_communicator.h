// The local backend's communicator: one rank of a group whose ranks are threads of this process.
// Ops are queued on the communicator's progress thread and rendezvous with the peers in the
// group's slots (see group_state.h); each rank moves its own share of the data. Sends and
// receives only post themselves to the group's mailbox (see mailbox.h), so the progress thread
// never waits for a peer's point-to-point op.
#pragma once

#include <atomic>
#include <exception>
#include <memory>
#include <vector>

#include "meshtrain/core/comm/communicator.h"
#include "meshtrain/core/comm/local/group_state.h"
#include "meshtrain/core/comm/local/progress_thread.h"
#include "meshtrain/core/comm/local/world_state.h"

namespace meshtrain::local {

class LocalCommunicator final : public Communicator {
 public:
  // tracker: the owning rank's MemoryTracker, charged for the progress thread's allocations.
  LocalCommunicator(std::shared_ptr<WorldState> world, std::shared_ptr<GroupState> group, int rank,
                    CommOptions options, MemoryTracker* tracker);
  // Destroying a communicator with ops still in flight (receives still waiting for their sender
  // included) fails its group, as the peers would otherwise wait for this rank until their
  // deadline; it never hangs.
  ~LocalCommunicator() override;

  std::string_view backend_name() const override { return "local"; }
  GroupState& group_state() { return *group_; }
  bool supports(CommOp) const override { return true; }

 protected:
  void check_buffer(const Tensor& buffer, std::string_view what) const override;

  WorkPtr do_all_gather(const Tensor& out, const Tensor& in) override;
  WorkPtr do_reduce_scatter(const Tensor& out, const Tensor& in, ReduceOp op) override;
  WorkPtr do_all_reduce(const Tensor& buffer, ReduceOp op) override;
  WorkPtr do_broadcast(const Tensor& buffer, int root) override;
  std::vector<WorkPtr> do_batch_p2p(const std::vector<P2POp>& ops) override;
  WorkPtr do_all_to_all(const Tensor& out, const Tensor& in) override;
  WorkPtr do_barrier() override;
  std::unique_ptr<Communicator> do_split(const std::vector<int>& members, int color, int key,
                                         std::string name) override;

 private:
  // One phase of a collective's data movement: `rank`'s share, once every rank has posted
  // (data_movement.h). A collective moves in one phase or, for an all-reduce, two.
  using MovePhase = void (*)(const Slot& slot, int rank);
  // Queues a collective: arrive in the next slot, then each phase of its movement, each rank its
  // own share between barriers, the last of which keeps every rank's buffers in use until all
  // have read them; or, where the last rank to arrive moves it all (last_rank_moves), that rank
  // every rank's share of every phase, in one meeting. stage_in: copy `in` first (it overlaps
  // `out` in a way that peers' reads and my writes would race on).
  // Buffers may be host or CUDA memory (all ranks alike; offload's crossings excepted); device
  // copies are ordered after the caller's stream at issue and finished before the op completes
  // or fails.
  WorkPtr collective(OpSignature signature, Tensor in, Tensor out, bool stage_in,
                     std::vector<MovePhase> phases);
  WaitContext context(CommOp op, uint64_t seq) const;
  // Fails the group with this rank's error, unless it came from the group.
  void fail_group_unless_peer_failure(const WaitContext& ctx, const std::exception_ptr& error);
  std::shared_ptr<AsyncWork> make_work(CommOp op, size_t bytes) const;

  std::shared_ptr<WorldState> world_;
  std::shared_ptr<GroupState> group_;
  MemoryTracker* tracker_;
  uint64_t next_collective_ = 0;
  uint64_t next_split_ = 0;
  std::vector<uint64_t> next_send_;  // by peer
  std::vector<uint64_t> next_recv_;  // by peer
  std::atomic<int> in_flight_{0};    // queued or running on the progress thread
  // Receives issued and perhaps unfinished (pruned at each batch): a rank that goes away with one
  // still waiting for its sender must fail the group.
  std::vector<std::weak_ptr<AsyncWork>> recvs_;
  ProgressThread progress_;  // last: joins before the state its tasks use goes away
};

}  // namespace meshtrain::local
