// Local backend specifics: i32 reductions, argument checks, in-place and overlapping buffers,
// staging memory charged to the rank.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "meshtrain/core/comm/gather_values.h"
#include "meshtrain/core/comm/local/local_world.h"
#include "meshtrain/core/comm/local/op_signature.h"
#include "meshtrain/core/comm/local/spawn_ranks.h"
#include "meshtrain/core/error.h"
#include "tests/comm/collective_checks.h"
#include "tests/support/error_message.h"

namespace meshtrain {
namespace {

using testing::contribution;
using testing::expect_values;
using testing::filled;
using testing::error_message;

const CommOptions kOptions{std::chrono::seconds(20)};

// Host values gathered bit-exactly, and their sum added in rank order: the same bits on every
// rank (0.1 + 0.2 + 0.3 in that order is not 0.6 in doubles).
TEST(LocalBackend, GatheredValuesAndTheirRankOrderSum) {
  spawn_ranks(3, [](RankContext& ctx) {
    const std::vector<double> mine = {0.1 * (ctx.rank + 1), -1.5};
    EXPECT_EQ(all_gather_values(ctx.world, mine),
              (std::vector<double>{0.1, -1.5, 0.2, -1.5, 0.1 * 3, -1.5}));
    EXPECT_EQ(sum_in_rank_order(ctx.world, 0.1 * (ctx.rank + 1)), (0.1 + 0.2) + 0.1 * 3);
    EXPECT_EQ(all_gather_values(ctx.world, std::vector<uint64_t>{~uint64_t{0} - ctx.rank}),
              (std::vector<uint64_t>{~uint64_t{0}, ~uint64_t{0} - 1, ~uint64_t{0} - 2}));
  });
}

// Different counts per rank (none on rank 1), and text of any length.
TEST(LocalBackend, VariableLengthValuesAndStrings) {
  spawn_ranks(3, [](RankContext& ctx) {
    std::vector<uint64_t> mine(ctx.rank == 1 ? 0 : ctx.rank + 2, 7 + ctx.rank);
    EXPECT_EQ(all_gather_variable(ctx.world, mine),
              (std::vector<std::vector<uint64_t>>{{7, 7}, {}, {9, 9, 9, 9}}));
    const std::string text = ctx.rank == 2 ? "" : std::string(5 + 9 * ctx.rank, 'a' + ctx.rank);
    EXPECT_EQ(all_gather_strings(ctx.world, text),
              (std::vector<std::string>{"aaaaa", std::string(14, 'b'), ""}));
  });
}

TEST(LocalBackend, RequireSameOnEveryRank) {
  spawn_ranks(3, [](RankContext& ctx) {
    require_same_on_every_rank(ctx.world, "same", "the value");
    const std::string mine = ctx.rank == 2 ? "ckpt/step-2" : "ckpt/step-4";
    EXPECT_THAT(
        error_message<InvalidArgument>([&] { require_same_on_every_rank(ctx.world, mine, "X"); }),
        ::testing::HasSubstr("X differs between ranks: rank 0 has 'ckpt/step-4', rank 2 has "
                             "'ckpt/step-2'"));
  });
}

TEST(LocalBackend, I32SumAndMax) {
  spawn_ranks(
      3,
      [](RankContext& ctx) {
        const int w = ctx.world_size, r = ctx.rank;
        Tensor sum = filled(50, DType::i32, [&](int64_t i) { return contribution(r, w, i); });
        ctx.world.all_reduce(sum, ReduceOp::sum)->wait();
        expect_values(sum, [&](int64_t i) { return static_cast<float>(w * (i % 13) + w * (w - 1)); },
                      "i32 sum");
        Tensor in = filled(3 * 5, DType::i32, [&](int64_t i) { return contribution(r, w, i); });
        Tensor out = Tensor::empty({5}, DType::i32);
        ctx.world.reduce_scatter_into(out, in, ReduceOp::max)->wait();
        expect_values(out,
                      [&](int64_t i) { return static_cast<float>((r * 5 + i) % 13 + 2 * (w - 1)); },
                      "i32 max");
      },
      kOptions);
}

TEST(LocalBackend, I32AvgIsRejectedWhenIssued) {
  spawn_ranks(
      2,
      [](RankContext& ctx) {
        Tensor t = Tensor::zeros({4}, DType::i32);
        EXPECT_THROW(ctx.world.all_reduce(t, ReduceOp::avg), InvalidArgument);
        Tensor out = Tensor::zeros({2}, DType::i32);
        EXPECT_THROW(ctx.world.reduce_scatter_into(out, t, ReduceOp::avg), InvalidArgument);
        ctx.world.barrier()->wait();  // nothing was queued: the group is still in step
      },
      kOptions);
}

TEST(LocalBackend, BadBuffersAreRejected) {
  spawn_ranks(
      1,
      [](RankContext& ctx) {
        EXPECT_THROW(ctx.world.all_reduce(Tensor(), ReduceOp::sum), InvalidArgument);
        Tensor cuda;
        try {
          cuda = Tensor::empty({4}, DType::f32, Device::cuda(0));
        } catch (const Error&) {
          return;  // no CUDA here: nothing more to check
        }
        EXPECT_THROW(ctx.world.all_reduce(cuda, ReduceOp::sum), InvalidArgument);
      },
      kOptions);
}

TEST(LocalBackend, EachRankCommunicatorOnlyOnce) {
  LocalWorld world(2);
  auto first = world.communicator(0);
  EXPECT_THROW(world.communicator(0), InvalidArgument);
  EXPECT_THROW(world.communicator(2), InvalidArgument);
  EXPECT_THROW(LocalWorld(0), InvalidArgument);
}

// The in-place and staged cases below at two sizes: n elements a rank whose ops the last rank to
// arrive moves for all, and n whose ops each rank moves its own share of (op_signature.h).
class LocalBackendInPlace : public ::testing::TestWithParam<int64_t> {
 protected:
  int64_t n() const { return GetParam(); }
  // Whether the last rank moves a host op of `bytes` a rank over 4 ranks: as the size intends.
  void expect_path(CommOp op, int64_t bytes, DType dtype) const {
    const bool small = n() <= 1000;
    EXPECT_EQ(local::last_rank_moves({op, static_cast<size_t>(bytes), dtype}, 4), small)
        << comm_op_name(op) << " of " << bytes << " bytes";
  }
};

// The FSDP layouts: all-gather into a buffer whose own chunk is the input, reduce-scatter into
// the own chunk of the input. Both need no staging.
TEST_P(LocalBackendInPlace, GatherAndScatterNeedNoStaging) {
  const int64_t n = this->n();
  expect_path(CommOp::all_gather, n * 2, DType::bf16);
  expect_path(CommOp::reduce_scatter, 4 * n * 4, DType::f32);
  spawn_ranks(
      4,
      [n](RankContext& ctx) {
        const int w = ctx.world_size, r = ctx.rank;
        Tensor full = filled(w * n, DType::bf16, [&](int64_t i) {
          return i / n == r ? contribution(r, w, i % n) : -1.0f;
        });
        ctx.world.all_gather_into(full, full.view(r * n, {n}))->wait();
        expect_values(full,
                      [&](int64_t i) { return contribution(static_cast<int>(i / n), w, i % n); },
                      "in-place all_gather");

        Tensor grads = filled(w * n, DType::f32, [&](int64_t i) { return contribution(r, w, i); });
        ctx.world.reduce_scatter_into(grads.view(r * n, {n}), grads, ReduceOp::avg)->wait();
        expect_values(grads.view(r * n, {n}),
                      [&](int64_t i) { return static_cast<float>((r * n + i) % 13 + w - 1); },
                      "in-place reduce_scatter");
        EXPECT_EQ(ctx.memory.stats(DeviceKind::cpu)[MemoryCategory::comm].peak, 0u);
      },
      kOptions);
}

// Overlaps that would race (all_to_all in place, all-gather input at the wrong chunk) are staged
// by the progress thread, and the staging is charged to the rank's tracker as comm memory.
TEST_P(LocalBackendInPlace, OverlappingBuffersAreStagedAndCharged) {
  const int64_t n = this->n();
  expect_path(CommOp::all_to_all, 4 * n * 4, DType::f32);
  expect_path(CommOp::all_gather, n * 4, DType::f32);
  spawn_ranks(
      4,
      [n](RankContext& ctx) {
        const int w = ctx.world_size, r = ctx.rank;
        Tensor buf = filled(w * n, DType::f32, [&](int64_t i) { return contribution(r, w, i); });
        ctx.world.all_to_all(buf, buf)->wait();
        expect_values(
            buf, [&](int64_t i) { return contribution(static_cast<int>(i / n), w, r * n + i % n); },
            "in-place all_to_all");
        EXPECT_EQ(ctx.memory.stats(DeviceKind::cpu)[MemoryCategory::comm].peak, buf.nbytes());

        Tensor full = filled(w * n, DType::f32, [&](int64_t i) {
          return i < n ? contribution(r, w, i) : -1.0f;
        });
        ctx.world.all_gather_into(full, full.view(0, {n}))->wait();  // chunk 0, not chunk r
        expect_values(full,
                      [&](int64_t i) { return contribution(static_cast<int>(i / n), w, i % n); },
                      "overlapping all_gather");
        EXPECT_EQ(ctx.memory.stats(DeviceKind::cpu)[MemoryCategory::comm].current, 0u);
      },
      kOptions);
}

INSTANTIATE_TEST_SUITE_P(Sizes, LocalBackendInPlace, ::testing::Values<int64_t>(256, 1000, 20000));

}  // namespace
}  // namespace meshtrain
