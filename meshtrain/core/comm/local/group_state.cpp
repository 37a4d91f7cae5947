#include "meshtrain/core/comm/local/group_state.h"

#include <exception>

#include "meshtrain/core/awake_wait.h"
#include "meshtrain/core/comm/local/peer_failure.h"
#include "meshtrain/core/comm/local/world_state.h"
#include "meshtrain/core/error.h"

namespace meshtrain::local {

namespace {
std::string rank_list(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}
}  // namespace

GroupState::GroupState(const WorldState& world, uint64_t id, std::string name,
                       std::vector<int> world_ranks)
    : world_(world),
      id_(id),
      name_(std::move(name)),
      world_ranks_(std::move(world_ranks)),
      mailbox_(name_, [this](const std::string& message) { fail(message); }) {}

std::string GroupState::where(const WaitContext& ctx) const {
  return detail::concat(comm_op_name(ctx.op), " op #", ctx.seq, " on group '", name_, "' (size ",
                        size(), ") at rank ", ctx.rank, " (world rank ", ctx.world_rank, ")");
}

// An abort reads exactly "rank R failed: reason"; a group failure also says which op it ended.
void GroupState::throw_if_failed_locked(const WaitContext& ctx) const {
  if (world_.aborted()) throw PeerFailure(world_.abort_message());
  if (!failure_.empty()) throw PeerFailure(detail::concat(where(ctx), " failed: ", failure_));
}

// Also drops the group's references to posted buffers: no slot of a failed group completes, and
// the buffers must not outlive their ranks' memory trackers. Ranks still inside an op hold their
// own reference to the slot, so nothing they read goes away.
void GroupState::release_locked(const std::string& message) {
  mailbox_.fail(message);
  slots_.clear();
}

void GroupState::fail_locked(const std::string& message) {
  if (!failure_.empty()) return;
  failure_ = message;
  release_locked(message);
  cv_.notify_all();
}

void GroupState::fail(const std::string& message) {
  std::lock_guard lock(mutex_);
  fail_locked(message);
}

void GroupState::wake_after_abort() {
  std::lock_guard lock(mutex_);
  release_locked(world_.abort_message());
  cv_.notify_all();
}

void GroupState::wait_locked(std::unique_lock<std::mutex>& lock, const WaitContext& ctx,
                             const std::function<bool()>& ready,
                             const std::function<std::string()>& missing) {
  // A failure wakes the wait as readiness does; the timeout counts only time this process ran.
  if (wait_awake(cv_, lock, ctx.timeout, [&] {
        throw_if_failed_locked(ctx);
        return ready();
      }))
    return;
  const std::string message =
      detail::concat("timed out after ", ctx.timeout.count(), " ms in ", where(ctx), ": ", missing());
  fail_locked(message);
  throw Timeout(message);
}

std::shared_ptr<Slot> GroupState::post_locked(const WaitContext& ctx, const OpSignature& signature,
                                              Post post) {
  std::shared_ptr<Slot>& entry = slots_[ctx.seq];
  if (!entry) {
    entry = std::make_shared<Slot>();
    entry->signature = signature;
    entry->first_rank = ctx.rank;
    entry->posts.resize(size());
    entry->reached.assign(size(), 0);
    entry->phase_done.assign(phase_count(signature, size()), 0);
  } else if (!(entry->signature == signature)) {
    const std::string message = detail::concat(
        "collective mismatch on group '", name_, "' op #", ctx.seq, ": rank ", entry->first_rank,
        " issued ", describe(entry->signature), " but rank ", ctx.rank, " issued ",
        describe(signature));
    fail_locked(message);
    throw CommError(message);
  }
  const std::shared_ptr<Slot> slot = entry;  // the map entry may go once everyone has passed
  slot->posts[ctx.rank] = std::move(post);
  return slot;
}

std::string GroupState::absent_locked(const Slot& slot) const {
  std::vector<int> absent;
  for (int r = 0; r < size(); ++r)
    if (slot.reached[r] == 0) absent.push_back(r);
  return detail::concat("ranks ", rank_list(absent), " never arrived");
}

std::shared_ptr<Slot> GroupState::arrive(const WaitContext& ctx, const OpSignature& signature,
                                         Post post) {
  std::unique_lock lock(mutex_);
  throw_if_failed_locked(ctx);
  const std::shared_ptr<Slot> slot = post_locked(ctx, signature, std::move(post));
  pass_phase_locked(ctx, *slot);
  wait_locked(
      lock, ctx, [&] { return slot->phase_done[0] == size(); },
      [&] { return absent_locked(*slot); });
  return slot;
}

void GroupState::arrive_last_moves(const WaitContext& ctx, const OpSignature& signature, Post post,
                                   const std::function<void(const Slot&)>& move_all) {
  MT_ASSERT(last_rank_moves(signature, size()), "arrive_last_moves for ", describe(signature));
  std::unique_lock lock(mutex_);
  throw_if_failed_locked(ctx);
  const std::shared_ptr<Slot> slot = post_locked(ctx, signature, std::move(post));
  slot->reached[ctx.rank] = 1;
  if (++slot->phase_done[0] < size()) {
    try {
      wait_locked(
          lock, ctx, [&] { return slot->phase_done[1] == size(); },
          [&] {
            if (slot->phase_done[0] < size()) return absent_locked(*slot);
            return std::string("the last rank to arrive did not finish moving the data");
          });
    } catch (...) {
      // The last rank may still be writing my outputs: my caller must not see them change after
      // my op has failed. The move is a bounded local copy, so this wait needs no deadline.
      cv_.wait(lock, [&] { return !slot->moving; });
      throw;
    }
    slot->posts[ctx.rank] = Post{};  // nobody reads my buffers now
    return;
  }
  // Every rank has posted, and none reads or writes its buffers until released: move unlocked.
  slot->moving = true;
  lock.unlock();
  std::exception_ptr error;
  try {
    move_all(*slot);
  } catch (...) {
    error = std::current_exception();
  }
  lock.lock();
  // However the move ended: wakes the waiters that failed meanwhile, and those released below.
  slot->moving = false;
  cv_.notify_all();
  if (error) std::rethrow_exception(error);
  throw_if_failed_locked(ctx);
  slot->posts[ctx.rank] = Post{};
  slot->phase_done[1] = size();
  slots_.erase(ctx.seq);
}

void GroupState::sync(const WaitContext& ctx, Slot& slot) {
  std::unique_lock lock(mutex_);
  const int phase = slot.reached[ctx.rank];
  MT_ASSERT_LT(phase, static_cast<int>(slot.phase_done.size()), "sync past the last phase");
  pass_phase_locked(ctx, slot);
  wait_locked(
      lock, ctx, [&] { return slot.phase_done[phase] == size(); },
      [&] {
        std::vector<int> behind;
        for (int r = 0; r < size(); ++r)
          if (slot.reached[r] <= phase) behind.push_back(r);
        return detail::concat("ranks ", rank_list(behind), " did not reach phase ", phase);
      });
}

void GroupState::pass_phase_locked(const WaitContext& ctx, Slot& slot) {
  const int phase = slot.reached[ctx.rank]++;
  if (++slot.phase_done[phase] < size()) return;
  // Only the last rank through a phase wakes the others.
  if (phase + 1 == static_cast<int>(slot.phase_done.size())) slots_.erase(ctx.seq);
  cv_.notify_all();
}

}  // namespace meshtrain::local
