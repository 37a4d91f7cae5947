// The local backend's two ways of moving a collective's data (op_signature.h: last_rank_moves):
// small host ops and shape-only ops moved by the last rank to arrive, in one meeting; the rest by
// each rank its own share, between barriers. Which one an op takes, and that both give every rank
// the same bits.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <latch>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "meshtrain/core/comm/local/group_state.h"
#include "meshtrain/core/comm/local/op_signature.h"
#include "meshtrain/core/comm/local/peer_failure.h"
#include "meshtrain/core/comm/local/spawn_ranks.h"
#include "meshtrain/core/comm/local/world_state.h"
#include "meshtrain/core/error.h"

namespace meshtrain {
namespace {

using local::GroupState;
using local::kLastRankMovesBytes;
using local::last_rank_moves;
using local::OpSignature;
using local::phase_count;
using local::Post;
using local::Slot;
using namespace std::chrono_literals;

OpSignature host(CommOp op, size_t bytes) { return {op, bytes, DType::f32}; }

// The bound is on what the op writes over the group's outputs: W buffers for an all-reduce, W
// gathered wholes (W x W inputs) for an all-gather, one input's worth for a reduce-scatter.
TEST(LastRankMoves, SmallHostOpsByWhatTheyWriteOverTheGroup) {
  const size_t limit = kLastRankMovesBytes;
  EXPECT_TRUE(last_rank_moves(host(CommOp::all_reduce, limit / 4), 4));
  EXPECT_FALSE(last_rank_moves(host(CommOp::all_reduce, limit / 4 + 4), 4));
  EXPECT_TRUE(last_rank_moves(host(CommOp::all_gather, limit / 16), 4));
  EXPECT_FALSE(last_rank_moves(host(CommOp::all_gather, limit / 8), 4));
  EXPECT_TRUE(last_rank_moves(host(CommOp::reduce_scatter, limit), 4));
  EXPECT_FALSE(last_rank_moves(host(CommOp::reduce_scatter, limit + 4), 4));
  EXPECT_TRUE(last_rank_moves(host(CommOp::broadcast, limit / 2), 2));
  EXPECT_FALSE(last_rank_moves(host(CommOp::all_to_all, limit), 2));
}

TEST(LastRankMoves, ShapeOnlyOpsAlwaysCudaOpsAndBarriersNever) {
  OpSignature shape_only = host(CommOp::all_gather, size_t{1} << 30);
  shape_only.memory = DeviceKind::meta;
  EXPECT_TRUE(last_rank_moves(shape_only, 512));
  OpSignature cuda = host(CommOp::all_reduce, 4);
  cuda.memory = DeviceKind::cuda;
  EXPECT_FALSE(last_rank_moves(cuda, 2));
  EXPECT_FALSE(last_rank_moves(host(CommOp::barrier, 0), 2));
}

// One meeting and its release where the last rank moves it all; an all-reduce moved rank by rank
// meets once more between its reduce-scatter and its all-gather.
TEST(LastRankMoves, PhasesEachOpWaitsAt) {
  EXPECT_EQ(phase_count(host(CommOp::barrier, 0), 4), 1);
  EXPECT_EQ(phase_count(host(CommOp::all_reduce, 64), 4), 2);
  EXPECT_EQ(phase_count(host(CommOp::all_reduce, kLastRankMovesBytes), 4), 3);
  EXPECT_EQ(phase_count(host(CommOp::all_gather, kLastRankMovesBytes), 4), 2);
}

// Sums of values that float addition does not add exactly: both ways reduce in rank order, so
// every rank holds the bits of ((x0 + x1) + x2), whichever rank arrived last.
TEST(LastRankMoves, EitherWayEveryRankHoldsTheRankOrderSum) {
  constexpr int kWorld = 3;
  const int64_t small = 1000;                                            // the last rank moves
  const int64_t large = static_cast<int64_t>(kLastRankMovesBytes) / 4;  // each rank its share
  ASSERT_TRUE(last_rank_moves(host(CommOp::all_reduce, small * 4), kWorld));
  ASSERT_FALSE(last_rank_moves(host(CommOp::all_reduce, large * 4), kWorld));
  for (const int64_t n : {small, large}) {
    std::vector<std::vector<float>> inputs(kWorld, std::vector<float>(n));
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> value(-1, 1);
    for (auto& input : inputs)
      for (float& x : input) x = value(rng);
    std::vector<std::vector<float>> results(kWorld);
    spawn_ranks(kWorld, [&](RankContext& ctx) {
      Tensor buffer = Tensor::empty({n}, DType::f32);
      std::copy(inputs[ctx.rank].begin(), inputs[ctx.rank].end(), buffer.data<float>());
      ctx.world.all_reduce(buffer, ReduceOp::sum)->wait();
      results[ctx.rank].assign(buffer.data<float>(), buffer.data<float>() + n);
    });
    for (int64_t i = 0; i < n; ++i) {
      const float expected = (inputs[0][i] + inputs[1][i]) + inputs[2][i];
      for (int r = 0; r < kWorld; ++r)
        ASSERT_EQ(results[r][i], expected) << "n = " << n << ", rank " << r << ", element " << i;
    }
  }
}

// A rank that never issues the op: the others' deadline names it, as rank by rank.
TEST(LastRankMoves, DeadlineNamesTheRanksThatNeverArrived) {
  std::mutex mutex;
  std::vector<std::string> caught;
  EXPECT_THROW(spawn_ranks(
                   3,
                   [&](RankContext& ctx) {
                     if (ctx.rank == 1) return;
                     try {
                       Tensor buffer = Tensor::zeros({16}, DType::f32);
                       ctx.world.all_reduce(buffer, ReduceOp::sum)->wait(std::chrono::seconds(10));
                     } catch (const std::exception& e) {
                       std::lock_guard lock(mutex);
                       caught.push_back(e.what());
                       throw;
                     }
                   },
                   CommOptions{std::chrono::milliseconds(300)}),
               Timeout);
  ASSERT_FALSE(caught.empty());
  const bool named = std::any_of(caught.begin(), caught.end(), [](const std::string& m) {
    return m.find("ranks 1 never arrived") != std::string::npos;
  });
  EXPECT_TRUE(named) << caught.front();
}

constexpr int kRanks = 3;
constexpr int64_t kElements = 4;

// The group itself, each rank a thread of the test's own that posts its buffer of kElements zeros
// as a small all-reduce; the last to arrive runs move(slot, its rank) in place of the data
// movement. on_error(rank) runs on the rank's thread once its op has thrown. Returns how each op
// ended (null: it succeeded).
std::vector<std::exception_ptr> meet(GroupState& group, std::chrono::milliseconds timeout,
                                     const std::vector<Tensor>& buffers,
                                     const std::function<void(const Slot&, int)>& move,
                                     const std::function<void(int)>& on_error) {
  const OpSignature signature = host(CommOp::all_reduce, kElements * 4);
  std::vector<std::exception_ptr> errors(kRanks);
  std::vector<std::thread> ranks;
  std::latch started(kRanks);  // all arrive together, well within any deadline
  for (int r = 0; r < kRanks; ++r)
    ranks.emplace_back([&, r] {
      const local::WaitContext ctx{r, r, CommOp::all_reduce, 0, timeout};
      started.arrive_and_wait();
      try {
        group.arrive_last_moves(ctx, signature, Post{buffers[r], buffers[r], nullptr},
                                [&](const Slot& slot) { move(slot, r); });
      } catch (...) {
        errors[r] = std::current_exception();
        on_error(r);
      }
    });
  for (std::thread& rank : ranks) rank.join();
  return errors;
}

template <typename E>
bool throws(const std::exception_ptr& error) {
  if (!error) return false;
  try {
    std::rethrow_exception(error);
  } catch (const E&) {
    return true;
  } catch (...) {
  }
  return false;
}

enum class Failure { world_abort, group_failure, deadline };

// The last rank moves unlocked. A rank whose wait fails meanwhile (the world aborts, the group
// fails, its own deadline passes) returns only once the move is over: its caller must not see its
// buffer written after its op has failed.
TEST(LastRankMoves, AWaitThatFailsReturnsOnlyOnceTheMoveIsOver) {
  const std::chrono::milliseconds deadline = 250ms;
  for (const Failure failure : {Failure::world_abort, Failure::group_failure, Failure::deadline}) {
    SCOPED_TRACE(testing::Message() << "failure " << static_cast<int>(failure));
    local::WorldState world;
    const std::shared_ptr<GroupState> group = world.make_group("slow", {0, 1, 2});
    std::vector<Tensor> buffers;
    for (int r = 0; r < kRanks; ++r) buffers.push_back(Tensor::zeros({kElements}));
    std::atomic<int> mover{-1};
    std::atomic<bool> moved{false};
    std::vector<std::vector<float>> seen(kRanks);  // by rank: its buffer once its op failed
    std::vector<int> moved_before(kRanks, 0);      // by rank: whether the move was over by then
    // Writes every rank's buffer, an element at a time; the failure comes after the first.
    auto move = [&](const Slot& slot, int rank) {
      mover = rank;
      for (const Post& post : slot.posts)
        for (int64_t i = 0; i < kElements; ++i) {
          post.out.data<float>()[i] = 1;
          if (&post == &slot.posts.front() && i == 0) {
            if (failure == Failure::world_abort) world.abort(rank, "test abort");
            if (failure == Failure::group_failure) group->fail("test failure");
            // The waiters arrived first: their deadlines pass well within this.
            if (failure == Failure::deadline) std::this_thread::sleep_for(6 * deadline);
          }
          std::this_thread::sleep_for(10ms);
        }
      moved = true;
    };
    const auto errors =
        meet(*group, failure == Failure::deadline ? deadline : 10s, buffers, move, [&](int rank) {
          moved_before[rank] = moved;
          seen[rank] = buffers[rank].to_vector();
        });
    ASSERT_GE(mover.load(), 0) << "no rank moved";
    ASSERT_TRUE(moved);
    EXPECT_TRUE(throws<PeerFailure>(errors[mover])) << "the mover's op did not fail";
    for (int r = 0; r < kRanks; ++r) {
      if (r == mover) continue;
      ASSERT_TRUE(throws<CommError>(errors[r])) << "rank " << r << "'s op did not fail";
      if (failure == Failure::deadline)
        EXPECT_TRUE(throws<Timeout>(errors[r]) || throws<PeerFailure>(errors[r]));
      else
        EXPECT_TRUE(throws<PeerFailure>(errors[r]));
      EXPECT_TRUE(moved_before[r]) << "rank " << r << " returned while the move went on";
      EXPECT_EQ(seen[r], buffers[r].to_vector()) << "rank " << r << "'s buffer changed after";
    }
  }
}

// A move that throws: the error reaches the mover's caller, which fails the group (as
// LocalCommunicator does), and that ends the others' waits with PeerFailure, not at their
// deadline.
TEST(LastRankMoves, AMoveThatThrowsFailsEveryRank) {
  local::WorldState world;
  const std::shared_ptr<GroupState> group = world.make_group("throws", {0, 1, 2});
  std::vector<Tensor> buffers;
  for (int r = 0; r < kRanks; ++r) buffers.push_back(Tensor::zeros({kElements}));
  std::atomic<int> mover{-1};
  const Slot* moved_slot = nullptr;  // the mover's thread alone writes and reads it
  const auto errors = meet(
      *group, 10s, buffers,
      [&](const Slot& slot, int rank) {
        mover = rank;
        moved_slot = &slot;
        throw std::runtime_error("copy failed");
      },
      [&](int rank) {
        if (rank != mover) return;
        // The slot lives on: the group and the waiters hold it until the group fails.
        EXPECT_FALSE(moved_slot->moving) << "a failed move left the slot moving";
        group->fail(detail::concat("rank ", rank, " failed in all_reduce op #0: copy failed"));
      });
  ASSERT_GE(mover.load(), 0) << "no rank moved";
  ASSERT_TRUE(errors[mover]) << "the mover's op did not fail";
  try {
    std::rethrow_exception(errors[mover]);
  } catch (const CommError& e) {
    ADD_FAILURE() << "the mover got " << e.what() << " rather than its move's error";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "copy failed");
  }
  for (int r = 0; r < kRanks; ++r) {
    if (r == mover) continue;
    EXPECT_TRUE(throws<PeerFailure>(errors[r])) << "rank " << r << " did not see the failure";
  }
}

}  // namespace
}  // namespace meshtrain
