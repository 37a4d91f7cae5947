// spawn_ranks: runs every rank, gives each its own memory tracker, rethrows the root cause.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "meshtrain/core/comm/local/spawn_ranks.h"
#include "meshtrain/core/error.h"

namespace meshtrain {
namespace {

TEST(SpawnRanks, RunsEveryRankOnceWithItsOwnWorldCommunicator) {
  for (int w : {1, 3, 8}) {
    std::vector<std::atomic<int>> runs(w);
    spawn_ranks(w, [&](RankContext& ctx) {
      EXPECT_EQ(ctx.world_size, w);
      EXPECT_EQ(ctx.world.size(), w);
      EXPECT_EQ(ctx.world.rank(), ctx.rank);
      EXPECT_EQ(ctx.world.name(), "world");
      EXPECT_EQ(ctx.world.backend_name(), "local");
      ++runs[ctx.rank];
    });
    for (int r = 0; r < w; ++r) EXPECT_EQ(runs[r].load(), 1) << "rank " << r << " of " << w;
  }
}

TEST(SpawnRanks, EachRankChargesItsOwnTracker) {
  spawn_ranks(3, [](RankContext& ctx) {
    EXPECT_EQ(current_memory_tracker(), &ctx.memory);
    const size_t before = ctx.memory.stats(DeviceKind::cpu).total.current;
    Tensor t = Tensor::empty({(ctx.rank + 1) * 1000});
    EXPECT_EQ(ctx.memory.stats(DeviceKind::cpu).total.current - before,
              static_cast<size_t>((ctx.rank + 1) * 4000));
  });
}

TEST(SpawnRanks, RethrowsTheRootCauseNotTheFailuresItCaused) {
  for (int attempt = 0; attempt < 5; ++attempt) {
    try {
      spawn_ranks(4, [](RankContext& ctx) {
        if (ctx.rank == 3) throw InvalidArgument("bad input on rank 3");
        ctx.world.barrier()->wait();  // ends in "rank 3 failed" on the others
      });
      FAIL() << "expected the root cause";
    } catch (const InvalidArgument& e) {
      EXPECT_STREQ(e.what(), "bad input on rank 3");
    }
  }
}

TEST(SpawnRanks, RethrowsExceptionsOfAnyType) {
  EXPECT_THROW(spawn_ranks(2,
                           [](RankContext& ctx) {
                             if (ctx.rank == 0) throw 42;
                             ctx.world.barrier()->wait();
                           }),
               int);
}

TEST(SpawnRanks, RejectsAnEmptyWorld) {
  EXPECT_THROW(spawn_ranks(0, [](RankContext&) {}), InvalidArgument);
}

}  // namespace
}  // namespace meshtrain
