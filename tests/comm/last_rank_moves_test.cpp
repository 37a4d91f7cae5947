// The local backend's two ways of moving a collective's data (op_signature.h: last_rank_moves):
// small host ops and shape-only ops moved by the last rank to arrive, in one meeting; the rest by
// each rank its own share, between barriers. Which one an op takes, and that both give every rank
// the same bits.
#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>
#include <random>
#include <vector>

#include "meshtrain/core/comm/local/op_signature.h"
#include "meshtrain/core/comm/local/spawn_ranks.h"
#include "meshtrain/core/error.h"

namespace meshtrain {
namespace {

using local::kLastRankMovesBytes;
using local::last_rank_moves;
using local::OpSignature;
using local::phase_count;

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

}  // namespace
}  // namespace meshtrain
