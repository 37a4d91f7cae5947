#include "meshtrain/core/comm/local/local_communicator.h"

#include <algorithm>
#include <thread>

#include "meshtrain/core/comm/local/data_movement.h"
#include "meshtrain/core/comm/local/peer_failure.h"
#include "meshtrain/core/device_memory.h"
#include "meshtrain/core/error.h"

namespace meshtrain::local {

namespace {

// Where t starts in its storage (tensors of distinct storages never share memory; shape-only
// tensors have no addresses to compare).
size_t byte_offset(const Tensor& t) {
  return static_cast<size_t>(t.offset()) * dtype_size(t.dtype());
}

bool overlap(const Tensor& a, const Tensor& b) {
  if (a.nbytes() == 0 || b.nbytes() == 0 || a.storage() != b.storage()) return false;
  const size_t a0 = byte_offset(a), b0 = byte_offset(b);
  return a0 < b0 + b.nbytes() && b0 < a0 + a.nbytes();
}

// in-place use is safe when `part` is exactly chunk `index` of `whole` (chunks of part's size).
bool is_chunk(const Tensor& part, const Tensor& whole, int index) {
  return part.storage() == whole.storage() &&
         byte_offset(part) == byte_offset(whole) + index * part.nbytes();
}

void check_reduction(DType dtype, ReduceOp op, std::string_view what) {
  MT_CHECK(!(dtype == DType::i32 && op == ReduceOp::avg), what,
           ": avg is not defined on i32 buffers; use sum or max");
}

// Device copies run on the progress thread's own stream; they must be finished before the rank
// tells its peers (or its caller) that it is done with their buffers.
void finish_device_copies(Device device, const WaitContext& ctx) {
  device_synchronize(device, ctx.timeout);
}

}  // namespace

LocalCommunicator::LocalCommunicator(std::shared_ptr<WorldState> world,
                                     std::shared_ptr<GroupState> group, int rank,
                                     CommOptions options, MemoryTracker* tracker)
    : Communicator(rank, group->world_ranks(), group->name(), options),
      world_(std::move(world)),
      group_(std::move(group)),
      tracker_(tracker),
      next_send_(size(), 0),
      next_recv_(size(), 0),
      progress_(tracker) {}

LocalCommunicator::~LocalCommunicator() {
  const bool receiving = std::any_of(recvs_.begin(), recvs_.end(), [](const auto& weak) {
    const auto work = weak.lock();
    return work && !work->is_completed();
  });
  if (in_flight_.load() > 0 || receiving)
    group_->fail(detail::concat("rank ", rank(), " (world rank ", world_rank(),
                                ") destroyed its communicator of group '", name(),
                                "' with ops still in flight"));
}

void LocalCommunicator::check_buffer(const Tensor& buffer, std::string_view what) const {
  MT_CHECK(buffer.defined(), what, ": undefined tensor");
  MT_CHECK(buffer.device().is_cpu() || buffer.device().is_cuda() || buffer.device().is_meta(), what,
           ": the local backend moves host, CUDA or shape-only buffers, got ", buffer.describe());
}

WaitContext LocalCommunicator::context(CommOp op, uint64_t seq) const {
  return WaitContext{rank(), world_rank(), op, seq, options().timeout};
}

std::shared_ptr<AsyncWork> LocalCommunicator::make_work(CommOp op, size_t bytes) const {
  return std::make_shared<AsyncWork>(describe(op, bytes), options().timeout);
}

WorkPtr LocalCommunicator::collective(OpSignature signature, Tensor in, Tensor out, bool stage_in,
                                      std::vector<MovePhase> phases) {
  const Device device = device_of(in, out);
  signature.memory = device.kind;
  // Before the op takes its number: a failure here leaves this rank's numbering in step.
  std::shared_ptr<const StreamMark> issued = StreamMark::record(device);
  auto work = make_work(signature.op, signature.bytes);
  const WaitContext ctx = context(signature.op, next_collective_++);
  ++in_flight_;
  auto task = [this, work, ctx, signature, device, in = std::move(in), out = std::move(out),
               issued = std::move(issued), stage_in, phases = std::move(phases)]() mutable {
    try {
      // Staged here, in op order, so the copy sees what earlier queued ops wrote (and, on a GPU,
      // what the caller's stream wrote before it issued the op).
      order_after(issued, device);
      Post post{in, out, issued};
      if (stage_in) {  // peers read the staged copy: they wait for the copy, which waited for issue
        post.in = in.clone();
        post.issued = StreamMark::record(device);
      }
      if (last_rank_moves(signature, size())) {
        group_->arrive_last_moves(ctx, signature, std::move(post), [&](const Slot& slot) {
          for (const MovePhase phase : phases)
            for (int r = 0; r < size(); ++r) phase(slot, r);
        });
      } else {
        std::shared_ptr<Slot> slot = group_->arrive(ctx, signature, std::move(post));
        // Host buffers need no ordering (and a barrier's peers may already be clearing their
        // posts).
        if (device.is_cuda())
          for (const Post& peer : slot->posts) order_after(peer.issued, device);
        for (const MovePhase phase : phases) {
          phase(*slot, rank());
          finish_device_copies(device, ctx);
          group_->sync(ctx, *slot);
        }
        // Past the last phase nobody reads my buffers: drop my handles before the op completes.
        slot->posts[ctx.rank] = Post{};
      }
      // The test hook's delay holds back completion (and the ops queued behind), not the issue.
      if (const auto delay = group_->op_delay(signature.op); delay.count() > 0)
        std::this_thread::sleep_for(delay);
      // Drop every handle (and free any staging) before the op completes, so that a waiter that
      // frees its buffers really frees them.
      in = Tensor();
      out = Tensor();
      --in_flight_;
      work->complete();
    } catch (...) {
      const std::exception_ptr error = std::current_exception();
      // The buffers go with this task: first let any copy it queued finish (best effort).
      if (device.is_cuda()) {
        try {
          finish_device_copies(device, ctx);
        } catch (...) {
        }
      }
      --in_flight_;
      fail_group_unless_peer_failure(ctx, error);
      work->fail(error);
    }
  };
  work->run_on_wait(progress_.runner_through(progress_.post(std::move(task))));
  return work;
}

void LocalCommunicator::fail_group_unless_peer_failure(const WaitContext& ctx,
                                                       const std::exception_ptr& error) {
  // A failure of this rank's own (a device error, no memory to stage): the peers waiting in the
  // op learn of it now rather than at their deadline. Group failures already reached them.
  try {
    std::rethrow_exception(error);
  } catch (const PeerFailure&) {
  } catch (const std::exception& e) {
    group_->fail(detail::concat("rank ", ctx.rank, " (world rank ", ctx.world_rank, ") failed in ",
                                comm_op_name(ctx.op), " op #", ctx.seq, ": ", e.what()));
  }
}

WorkPtr LocalCommunicator::do_all_gather(const Tensor& out, const Tensor& in) {
  const bool stage = overlap(in, out) && !is_chunk(in, out, rank());
  return collective({CommOp::all_gather, in.nbytes(), in.dtype()}, in, out, stage,
                    {gather_from_peers});
}

WorkPtr LocalCommunicator::do_reduce_scatter(const Tensor& out, const Tensor& in, ReduceOp op) {
  check_reduction(in.dtype(), op, "reduce_scatter");
  const bool stage = overlap(in, out) && !is_chunk(out, in, rank());
  return collective({CommOp::reduce_scatter, in.nbytes(), in.dtype(), op}, in, out, stage,
                    {reduce_my_chunk});
}

WorkPtr LocalCommunicator::do_all_reduce(const Tensor& buffer, ReduceOp op) {
  check_reduction(buffer.dtype(), op, "all_reduce");
  return collective({CommOp::all_reduce, buffer.nbytes(), buffer.dtype(), op}, buffer, buffer,
                    false, {all_reduce_reduce_phase, all_reduce_gather_phase});
}

WorkPtr LocalCommunicator::do_broadcast(const Tensor& buffer, int root) {
  OpSignature signature{CommOp::broadcast, buffer.nbytes(), buffer.dtype()};
  signature.root = root;
  return collective(signature, buffer, buffer, false, {copy_from_root});
}

WorkPtr LocalCommunicator::do_all_to_all(const Tensor& out, const Tensor& in) {
  return collective({CommOp::all_to_all, in.nbytes(), in.dtype()}, in, out, overlap(in, out),
                    {exchange_chunks});
}

WorkPtr LocalCommunicator::do_barrier() {
  return collective({CommOp::barrier}, Tensor(), Tensor(), false, {});
}

std::vector<WorkPtr> LocalCommunicator::do_batch_p2p(const std::vector<P2POp>& ops) {
  struct Posting {
    P2POp op;
    P2PKey key;
    std::shared_ptr<const StreamMark> issued;
    std::shared_ptr<AsyncWork> work;
  };
  std::vector<Posting> postings;
  std::vector<WorkPtr> works;
  std::erase_if(recvs_, [](const auto& weak) {
    const auto work = weak.lock();
    return !work || work->is_completed();
  });
  for (const P2POp& op : ops) {
    const bool sends = op.kind == P2POp::send;
    std::shared_ptr<const StreamMark> issued = StreamMark::record(op.buffer.device());
    // Numbered per pair and direction at issue, so the n-th send meets the n-th receive.
    const P2PKey key = sends ? P2PKey{rank(), op.peer, next_send_[op.peer]++}
                             : P2PKey{op.peer, rank(), next_recv_[op.peer]++};
    auto work = std::make_shared<AsyncWork>(describe(op), options().timeout);
    if (!sends) recvs_.push_back(work);
    postings.push_back({op, key, std::move(issued), work});
    works.push_back(std::move(work));
  }
  ++in_flight_;
  // Posted in queue order, so a send reads its buffer after the ops queued before it wrote it.
  // Posting never waits: a receive stays in the mailbox until its sender arrives, and the ops
  // queued behind it go on.
  std::vector<std::shared_ptr<AsyncWork>> async_works;
  for (const Posting& p : postings) async_works.push_back(p.work);
  auto task = [this, postings = std::move(postings)]() mutable {
    // Before posting, which may complete the Works: a caller that saw them complete and then
    // destroyed the communicator must not find this task still counted. Unfinished receives are
    // tracked in recvs_ instead.
    --in_flight_;
    Mailbox& mailbox = group_->mailbox();
    // The mailbox takes the buffers: once it settles a Work, nothing here holds them any more.
    for (Posting& p : postings) {
      try {
        if (p.op.kind == P2POp::send)
          mailbox.post_send(p.key, std::move(p.op.buffer), std::move(p.issued), p.work);
        else
          mailbox.post_recv(p.key, std::move(p.op.buffer), std::move(p.issued), p.work);
      } catch (...) {
        p.work->fail(std::current_exception());
      }
    }
  };
  // A receive waited for at once posts itself, then waits for its sender.
  const ProgressThread::Ticket ticket = progress_.post(std::move(task));
  for (const auto& work : async_works) work->run_on_wait(progress_.runner_through(ticket));
  return works;
}

std::unique_ptr<Communicator> LocalCommunicator::do_split(const std::vector<int>& members,
                                                          int color, int, std::string name) {
  std::vector<int> world_ranks;
  for (int m : members) world_ranks.push_back(this->world_ranks()[m]);
  const int new_rank =
      static_cast<int>(std::find(members.begin(), members.end(), rank()) - members.begin());
  auto group = world_->join_split(group_->id(), next_split_++, color, world_ranks, name);
  return std::make_unique<LocalCommunicator>(world_, std::move(group), new_rank, options(),
                                             tracker_);
}

}  // namespace meshtrain::local
