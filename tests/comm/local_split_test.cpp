// Sub-communicators of the local backend: split and split_group, concurrent collectives on
// different groups, nested splits.
#include <gtest/gtest.h>

#include "meshtrain/core/comm/local/spawn_ranks.h"
#include "meshtrain/core/error.h"
#include "tests/comm/collective_checks.h"

namespace meshtrain {
namespace {

const CommOptions kOptions{std::chrono::seconds(20)};

class LocalSplit : public ::testing::TestWithParam<int> {};

// Ranks split by parity; both halves run the full set of checks at the same time.
TEST_P(LocalSplit, ByColorRunsEveryCollective) {
  const int w = GetParam();
  spawn_ranks(
      w,
      [&](RankContext& ctx) {
        auto half = ctx.world.split(ctx.rank % 2, ctx.rank, "half");
        const int members = (w + 1 - ctx.rank % 2) / 2;
        ASSERT_EQ(half->size(), members);
        EXPECT_EQ(half->name(), "half");
        EXPECT_EQ(half->rank(), ctx.rank / 2);
        EXPECT_EQ(half->world_rank(), ctx.rank);
        for (int i = 0; i < half->size(); ++i) EXPECT_EQ(half->world_ranks()[i], 2 * i + ctx.rank % 2);
        testing::check_all_gather(*half, 100, DType::f32);
        testing::check_reduce_scatter(*half, 100, DType::bf16, ReduceOp::avg);
        testing::check_all_reduce(*half, 1001, DType::f32, ReduceOp::sum);
        testing::check_broadcast(*half, 100, DType::bf16, half->size() - 1);
        testing::check_send_recv_ring(*half, 100, DType::f32);
        testing::check_all_to_all(*half, 10, DType::f32);
        testing::check_barrier(*half);
        // The parent still works after (and independently of) the split.
        testing::check_all_reduce(ctx.world, 100, DType::f32, ReduceOp::max);
      },
      kOptions);
}

// Keys reorder ranks inside the new group.
TEST_P(LocalSplit, KeyOrdersTheNewGroup) {
  const int w = GetParam();
  spawn_ranks(
      w,
      [&](RankContext& ctx) {
        auto reversed = ctx.world.split(0, w - ctx.rank, "reversed");
        EXPECT_EQ(reversed->rank(), w - 1 - ctx.rank);
        testing::check_all_gather(*reversed, 7, DType::f32);
      },
      kOptions);
}

INSTANTIATE_TEST_SUITE_P(Worlds, LocalSplit, ::testing::Values(1, 2, 3, 4, 8));

// A 2 x 4 mesh: "tp" groups of consecutive ranks and "dp" groups across them, with collectives
// in flight on both at once.
TEST(LocalSplitGroup, TwoAxesRunConcurrently) {
  spawn_ranks(
      8,
      [](RankContext& ctx) {
        const int row = ctx.rank / 4, col = ctx.rank % 4;
        std::vector<int> tp_members, dp_members;
        for (int c = 0; c < 4; ++c) tp_members.push_back(row * 4 + c);
        for (int r = 0; r < 2; ++r) dp_members.push_back(r * 4 + col);
        auto tp = ctx.world.split_group(tp_members, "tp");
        auto dp = ctx.world.split_group(dp_members, "dp");
        ASSERT_EQ(tp->size(), 4);
        ASSERT_EQ(dp->size(), 2);
        EXPECT_EQ(tp->world_ranks(), tp_members);
        EXPECT_EQ(dp->world_ranks(), dp_members);

        Tensor tp_buf = testing::filled(4096, DType::f32, [&](int64_t i) {
          return testing::contribution(tp->rank(), 4, i);
        });
        Tensor dp_in = testing::filled(4096, DType::bf16, [&](int64_t i) {
          return testing::contribution(dp->rank(), 2, i);
        });
        Tensor dp_out = Tensor::empty({2 * 4096}, DType::bf16);
        std::vector<WorkPtr> works;
        for (int round = 0; round < 4; ++round) {
          works.push_back(tp->barrier());
          works.push_back(dp->barrier());
        }
        works.push_back(tp->all_reduce(tp_buf, ReduceOp::sum));
        works.push_back(dp->all_gather_into(dp_out, dp_in));
        for (const WorkPtr& work : works) work->wait();
        testing::expect_values(
            tp_buf, [](int64_t i) { return static_cast<float>(4 * (i % 13) + 12); }, "tp sum");
        testing::expect_values(
            dp_out,
            [](int64_t i) { return testing::contribution(static_cast<int>(i / 4096), 2, i % 4096); },
            "dp gather");
      },
      kOptions);
}

TEST(LocalSplitGroup, NestedSplitsAndSingletons) {
  spawn_ranks(
      4,
      [](RankContext& ctx) {
        auto pair = ctx.world.split(ctx.rank / 2, ctx.rank, "pair");
        auto single = pair->split(pair->rank(), 0, "single");
        EXPECT_EQ(single->size(), 1);
        EXPECT_EQ(single->world_rank(), ctx.rank);
        testing::check_all_reduce(*single, 33, DType::bf16, ReduceOp::avg);
        testing::check_all_gather(*single, 33, DType::f32);
        // Two splits in a row from the same parent form distinct groups.
        auto again = ctx.world.split(ctx.rank / 2, ctx.rank, "pair2");
        testing::check_all_reduce(*again, 65, DType::f32, ReduceOp::sum);
        testing::check_all_reduce(*pair, 65, DType::f32, ReduceOp::max);
      },
      kOptions);
}

TEST(LocalSplitGroup, GroupsThatDoNotPartitionAreRejected) {
  EXPECT_THROW(spawn_ranks(
                   2,
                   [](RankContext& ctx) {
                     // Rank 0 claims {0, 1} while rank 1 claims {1}: they disagree.
                     ctx.world.split_group(ctx.rank == 0 ? std::vector<int>{0, 1}
                                                         : std::vector<int>{1},
                                           "bad");
                   },
                   kOptions),
               InvalidArgument);
}

}  // namespace
}  // namespace meshtrain
