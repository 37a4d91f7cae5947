// Failures of the local backend end every rank's wait with a message that says what happened:
// mismatched collectives, ranks that never arrive, ranks that throw, aborts, destroyed
// communicators. Nothing may hang.
#include <gtest/gtest.h>

#include <mutex>
#include <thread>

#include "meshtrain/core/comm/local/local_world.h"
#include "meshtrain/core/comm/local/spawn_ranks.h"
#include "meshtrain/core/error.h"
#include "tests/comm/collective_checks.h"

namespace meshtrain {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

const CommOptions kShort{milliseconds(300)};

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// What each rank caught, by rank.
class Caught {
 public:
  explicit Caught(int world) : messages_(world) {}
  // Runs body, records the message of what it throws, and rethrows it.
  template <typename Body>
  void run(int rank, Body body) {
    try {
      body();
    } catch (const std::exception& e) {
      std::lock_guard lock(mutex_);
      messages_[rank] = e.what();
      throw;
    }
  }
  const std::string& operator[](int rank) const { return messages_[rank]; }

 private:
  std::mutex mutex_;
  std::vector<std::string> messages_;
};

TEST(LocalFailure, MismatchedCollectivesFailEveryRankNamingBoth) {
  Caught caught(3);
  EXPECT_THROW(spawn_ranks(
                   3,
                   [&](RankContext& ctx) {
                     caught.run(ctx.rank, [&] {
                       Tensor small = Tensor::zeros({256});
                       Tensor big = Tensor::zeros({768});
                       if (ctx.rank == 2)
                         ctx.world.reduce_scatter_into(small, big, ReduceOp::sum)->wait();
                       else
                         ctx.world.all_gather_into(big, small)->wait();
                     });
                   },
                   CommOptions{std::chrono::seconds(20)}),
               CommError);
  for (int r = 0; r < 3; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r) + ": " + caught[r]);
    EXPECT_TRUE(contains(caught[r], "collective mismatch on group 'world' op #0"));
    EXPECT_TRUE(contains(caught[r], "all_gather of 1024 bytes (f32)"));
    EXPECT_TRUE(contains(caught[r], "reduce_scatter (sum) of 3072 bytes (f32)"));
  }
}

TEST(LocalFailure, MismatchedRootsAreDetected) {
  EXPECT_THROW(spawn_ranks(2,
                           [](RankContext& ctx) {
                             Tensor t = Tensor::zeros({4});
                             ctx.world.broadcast(t, ctx.rank)->wait();  // each its own root
                           }),
               CommError);
}

TEST(LocalFailure, RankThatNeverArrivesTimesOutNamingOpGroupAndRank) {
  Caught caught(3);
  const auto start = Clock::now();
  std::string reported;
  try {
    spawn_ranks(3,
                [&](RankContext& ctx) {
                  if (ctx.rank == 2) return;  // never joins the all_gather
                  caught.run(ctx.rank, [&] {
                    Tensor in = Tensor::zeros({4});
                    Tensor out = Tensor::zeros({12});
                    ctx.world.all_gather_into(out, in)->wait();
                  });
                },
                kShort);
    FAIL() << "expected Timeout";
  } catch (const Timeout& e) {
    reported = e.what();
  }
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
  EXPECT_TRUE(contains(reported, "timed out after 300 ms")) << reported;
  EXPECT_TRUE(contains(reported, "all_gather")) << reported;
  EXPECT_TRUE(contains(reported, "group 'world'")) << reported;
  EXPECT_TRUE(contains(reported, "at rank 0") || contains(reported, "at rank 1")) << reported;
  // The other waiting rank timed out too, or was woken by the first one's failure.
  for (int r = 0; r < 2; ++r) EXPECT_TRUE(contains(caught[r], "all_gather")) << caught[r];
}

// With a longer wait() than the backend's deadline, the backend's own timeout reports which
// ranks are missing.
TEST(LocalFailure, InternalDeadlineNamesTheMissingRanks) {
  Caught caught(3);
  EXPECT_THROW(spawn_ranks(3,
                           [&](RankContext& ctx) {
                             if (ctx.rank == 1) return;
                             caught.run(ctx.rank, [&] {
                               ctx.world.barrier()->wait(std::chrono::seconds(10));
                             });
                           },
                           kShort),
               Timeout);
  EXPECT_TRUE(contains(caught[0], "barrier op #0 on group 'world'")) << caught[0];
  EXPECT_TRUE(contains(caught[0], "ranks 1 never arrived")) << caught[0];
}

TEST(LocalFailure, RankThatThrowsWakesTheOthersNamingIt) {
  Caught caught(4);
  try {
    spawn_ranks(4, [&](RankContext& ctx) {
      caught.run(ctx.rank, [&] {
        testing::check_all_reduce(ctx.world, 100, DType::f32, ReduceOp::sum);
        if (ctx.rank == 2) {
          std::this_thread::sleep_for(milliseconds(50));  // the others are waiting by now
          throw std::runtime_error("boom in rank 2");
        }
        Tensor t = Tensor::zeros({100});
        ctx.world.all_reduce(t, ReduceOp::sum)->wait();
      });
    });
    FAIL() << "expected the root cause";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "boom in rank 2");
  }
  for (int r : {0, 1, 3})
    EXPECT_TRUE(contains(caught[r], "rank 2 failed: boom in rank 2")) << caught[r];
}

TEST(LocalFailure, SendRecvSizeMismatchFailsBothSides) {
  Caught caught(2);
  EXPECT_THROW(spawn_ranks(2,
                           [&](RankContext& ctx) {
                             caught.run(ctx.rank, [&] {
                               if (ctx.rank == 0) {
                                 ctx.world.send(Tensor::zeros({16}), 1)->wait();
                               } else {
                                 ctx.world.recv(Tensor::zeros({8}), 0)->wait();
                               }
                             });
                           },
                           CommOptions{std::chrono::seconds(20)}),
               CommError);
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(contains(caught[r], "send/recv mismatch on group 'world'")) << caught[r];
    EXPECT_TRUE(contains(caught[r], "64 bytes (f32)")) << caught[r];
    EXPECT_TRUE(contains(caught[r], "32 bytes (f32)")) << caught[r];
  }
}

TEST(LocalFailure, RecvWithoutSendTimesOut) {
  EXPECT_THROW(spawn_ranks(2,
                           [](RankContext& ctx) {
                             if (ctx.rank == 1) ctx.world.recv(Tensor::zeros({8}), 0)->wait();
                           },
                           kShort),
               Timeout);
}

// The LocalWorld API on its own: an abort wakes pending waits and fails later ops.
TEST(LocalWorldAbort, WakesPendingAndFutureWaits) {
  LocalWorld world(2, CommOptions{std::chrono::seconds(60)});
  auto rank0 = world.communicator(0);
  auto rank1 = world.communicator(1);
  WorkPtr pending = rank0->barrier();
  std::this_thread::sleep_for(milliseconds(20));
  const auto start = Clock::now();
  world.abort(1, "gone");
  world.abort(0, "a later abort does not replace the first");
  try {
    pending->wait();
    FAIL() << "expected CommError";
  } catch (const CommError& e) {
    EXPECT_STREQ(e.what(), "rank 1 failed: gone");
  }
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
  EXPECT_THROW(rank1->barrier()->wait(), CommError);
  EXPECT_THROW(rank0->send(Tensor::zeros({1}), 1)->wait(), CommError);
}

TEST(LocalWorldAbort, PendingSendsFailToo) {
  LocalWorld world(2, CommOptions{std::chrono::seconds(60)});
  auto rank0 = world.communicator(0);
  auto rank1 = world.communicator(1);
  WorkPtr send = rank0->send(Tensor::zeros({4}), 1);  // nobody receives
  std::this_thread::sleep_for(milliseconds(20));
  world.abort(1, "gone");
  EXPECT_THROW(send->wait(), CommError);
}

// Destroying a communicator with an op in flight does not hang, and fails its peers promptly.
TEST(LocalWorldAbort, DestroyingACommunicatorWithPendingOpsFailsItsGroup) {
  LocalWorld world(2, CommOptions{std::chrono::seconds(60)});
  auto rank0 = world.communicator(0);
  auto rank1 = world.communicator(1);
  WorkPtr orphan = rank0->barrier();
  const auto start = Clock::now();
  rank0.reset();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
  try {
    rank1->barrier()->wait();
    FAIL() << "expected CommError";
  } catch (const CommError& e) {
    EXPECT_TRUE(contains(e.what(), "rank 0 (world rank 0) destroyed its communicator")) << e.what();
  }
  EXPECT_THROW(orphan->wait(), CommError);
}

}  // namespace
}  // namespace meshtrain
