// Point-to-point on the local backend when something goes wrong, or would have gone wrong while a
// receive held up its progress thread: mismatched sizes and dtypes, a silent peer, invalid
// batches, aborts and destroyed communicators. Nothing may hang.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "meshtrain/core/comm/local/local_world.h"
#include "meshtrain/core/comm/local/spawn_ranks.h"
#include "meshtrain/core/error.h"
#include "tests/support/error_message.h"

namespace meshtrain {
namespace {

using std::chrono::milliseconds;
using testing::expect_error;
using Clock = std::chrono::steady_clock;

const CommOptions kShort{milliseconds(300)};
const CommOptions kLong{std::chrono::seconds(20)};

Tensor full(int64_t n, float value) {
  return Tensor::from_vector(std::vector<float>(static_cast<size_t>(n), value), {n});
}

// Waits on every Work in order; the first failure escapes.
void wait_all(const std::vector<WorkPtr>& works) {
  for (const WorkPtr& work : works) work->wait();
}

// Rank 1 receives 8 elements where rank 0 sends 16, inside batches that also carry a matching
// transfer the other way: both ranks learn of the mismatch with both sizes.
TEST(LocalP2PFailure, SizeMismatchInABatchFailsBothSidesNamingBoth) {
  spawn_ranks(
      2,
      [](RankContext& ctx) {
        const int peer = 1 - ctx.rank;
        const Tensor out = full(ctx.rank == 0 ? 16 : 4, 1.0f);
        const Tensor in = full(ctx.rank == 0 ? 4 : 8, 0.0f);
        expect_error<CommError>(
            [&] {
              wait_all(ctx.world.batch_p2p({{P2POp::recv, in, peer}, {P2POp::send, out, peer}}));
            },
            "send/recv mismatch on group 'world'", "rank 0's send #0 to rank 1 has 64 bytes (f32)",
            "rank 1's recv expects 32 bytes (f32)");
      },
      kLong);
}

TEST(LocalP2PFailure, DtypeMismatchIsReported) {
  spawn_ranks(
      2,
      [](RankContext& ctx) {
        expect_error<CommError>(
            [&] {
              if (ctx.rank == 0)
                ctx.world.batch_p2p({{P2POp::send, full(8, 1.0f), 1}})[0]->wait();
              else
                ctx.world.batch_p2p({{P2POp::recv, Tensor::zeros({16}, DType::bf16), 0}})[0]
                    ->wait();
            },
            "send/recv mismatch", "32 bytes (f32)", "32 bytes (bf16)");
      },
      kLong);
}

TEST(LocalP2PFailure, RecvFromASilentPeerTimesOutNamingIt) {
  const auto start = Clock::now();
  spawn_ranks(
      2,
      [](RankContext& ctx) {
        if (ctx.rank == 0) return;  // never sends
        const std::vector<WorkPtr> works = ctx.world.batch_p2p({{P2POp::recv, full(8, 0.0f), 0}});
        expect_error<Timeout>([&] { works[0]->wait(); }, "timed out after 300 ms",
                              "recv of 32 bytes from rank 0 on group 'world'",
                              "at rank 1 (world rank 1)");
      },
      kShort);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
}

// A receive whose sender comes late leaves the ops queued behind it free to run: here the
// sender sends only after a collective that the receiving rank issued after its receive.
TEST(LocalP2PFailure, PendingRecvDoesNotHoldUpLaterCollectives) {
  spawn_ranks(
      3,
      [](RankContext& ctx) {
        WorkPtr received;
        const Tensor in = full(5, 0.0f);
        if (ctx.rank == 0) received = ctx.world.recv(in, 1);
        Tensor sum = full(1, static_cast<float>(ctx.rank));
        ctx.world.all_reduce(sum, ReduceOp::sum)->wait();
        EXPECT_EQ(sum.to_vector()[0], 3.0f);
        ctx.world.barrier()->wait();
        if (ctx.rank == 1) ctx.world.send(full(5, 7.0f), 0)->wait();
        if (ctx.rank == 0) {
          received->wait();
          EXPECT_EQ(in.to_vector(), std::vector<float>(5, 7.0f));
        }
      },
      kLong);
}

// Nor does it hold up transfers with other peers, issued after it.
TEST(LocalP2PFailure, PendingRecvDoesNotHoldUpOtherPeers) {
  spawn_ranks(
      3,
      [](RankContext& ctx) {
        const int r = ctx.rank;
        if (r == 0) {
          const Tensor late = full(3, 0.0f);
          const Tensor early = full(3, 0.0f);
          WorkPtr from_late = ctx.world.recv(late, 1);
          wait_all(ctx.world.batch_p2p({{P2POp::recv, early, 2}, {P2POp::send, full(3, 0.5f), 2}}));
          EXPECT_EQ(early.to_vector(), std::vector<float>(3, 2.0f));
          ctx.world.send(full(1, 1.0f), 1)->wait();  // tells rank 1 to send now
          from_late->wait();
          EXPECT_EQ(late.to_vector(), std::vector<float>(3, 1.0f));
        } else if (r == 1) {
          ctx.world.recv(full(1, 0.0f), 0)->wait();
          ctx.world.send(full(3, 1.0f), 0)->wait();
        } else {
          const Tensor in = full(3, 0.0f);
          wait_all(ctx.world.batch_p2p({{P2POp::recv, in, 0}, {P2POp::send, full(3, 2.0f), 0}}));
          EXPECT_EQ(in.to_vector(), std::vector<float>(3, 0.5f));
        }
      },
      kLong);
}

// A batch with one bad op starts none of its ops and counts nothing; the next exchange then
// pairs up as if the bad batch had never been issued.
TEST(LocalP2PFailure, InvalidBatchStartsNothing) {
  spawn_ranks(
      2,
      [](RankContext& ctx) {
        const int peer = 1 - ctx.rank;
        const Tensor wrong = full(2, -1.0f);
        expect_error<InvalidArgument>(
            [&] {
              ctx.world.batch_p2p({{P2POp::send, wrong, peer}, {P2POp::send, wrong, ctx.rank}});
            },
            "batch_p2p op 1 (send)", "peer " + std::to_string(ctx.rank) + " must be another rank");
        expect_error<InvalidArgument>(
            [&] {
              ctx.world.batch_p2p({{P2POp::send, wrong, peer}, {P2POp::recv, wrong, 2}});
            },
            "batch_p2p op 1 (recv)", "peer 2");
        expect_error<InvalidArgument>(
            [&] {
              ctx.world.batch_p2p({{P2POp::recv, Tensor(), peer}});
            },
            "recv buffer: undefined tensor");
        expect_error<InvalidArgument>([&] { ctx.world.send(wrong, ctx.rank); }, "send: peer");
        EXPECT_EQ(ctx.world.counters().count(CommOp::send), 0u);
        EXPECT_EQ(ctx.world.counters().count(CommOp::recv), 0u);
        EXPECT_TRUE(ctx.world.batch_p2p({}).empty());

        const Tensor in = full(2, 0.0f);
        wait_all(ctx.world.batch_p2p(
            {{P2POp::recv, in, peer}, {P2POp::send, full(2, static_cast<float>(ctx.rank)), peer}}));
        EXPECT_EQ(in.to_vector(), std::vector<float>(2, static_cast<float>(peer)));
      },
      kLong);
}

// The LocalWorld API on its own: an abort fails both sides of a pending batch promptly.
TEST(LocalP2PAbort, AbortWakesAPendingBatch) {
  LocalWorld world(2, CommOptions{std::chrono::seconds(60)});
  auto rank0 = world.communicator(0);
  auto rank1 = world.communicator(1);
  const std::vector<WorkPtr> works =
      rank0->batch_p2p({{P2POp::recv, full(4, 0.0f), 1}, {P2POp::send, full(4, 1.0f), 1}});
  std::this_thread::sleep_for(milliseconds(20));
  const auto start = Clock::now();
  world.abort(1, "gone");
  for (const WorkPtr& work : works)
    EXPECT_EQ(testing::error_message<CommError>([&] { work->wait(); }), "rank 1 failed: gone");
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
  EXPECT_THROW(rank0->recv(full(4, 0.0f), 1)->wait(), CommError);  // and later ones fail at once
}

// A rank that goes away with a receive still waiting for its sender fails the group, so that its
// peers do not wait for it until their deadline.
TEST(LocalP2PAbort, DestroyingACommunicatorWithAPendingRecvFailsItsGroup) {
  LocalWorld world(2, CommOptions{std::chrono::seconds(60)});
  auto rank0 = world.communicator(0);
  auto rank1 = world.communicator(1);
  WorkPtr orphan = rank0->recv(full(4, 0.0f), 1);
  std::this_thread::sleep_for(milliseconds(20));  // posted by now: nothing is queued any more
  rank0.reset();
  const auto start = Clock::now();
  expect_error<CommError>([&] { rank1->barrier()->wait(); },
                          "rank 0 (world rank 0) destroyed its communicator");
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
  EXPECT_THROW(orphan->wait(), CommError);
}

}  // namespace
}  // namespace meshtrain
