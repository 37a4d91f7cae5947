// The local backend over shape-only (meta) buffers, as a dry run drives it: every collective and
// transfer is checked, synchronised and counted as over real buffers, and moves nothing; ranks
// must agree on where their buffers live.
#include <gtest/gtest.h>

#include "meshtrain/core/comm/local/spawn_ranks.h"
#include "meshtrain/core/error.h"
#include "tests/support/error_message.h"

namespace meshtrain {
namespace {

using testing::expect_error;

const CommOptions kOptions{std::chrono::seconds(20)};

Tensor meta(int64_t n) { return Tensor::empty({n}, DType::f32, Device::meta()); }

TEST(LocalMeta, CollectivesAndTransfersAreCountedAndMoveNothing) {
  constexpr int kWorld = 4;
  spawn_ranks(
      kWorld,
      [](RankContext& ctx) {
        Communicator& c = ctx.world;
        const Tensor whole = meta(8 * kWorld);
        const auto staged = [&] {
          return ctx.memory.stats(DeviceKind::meta)[MemoryCategory::comm].peak;
        };
        c.all_gather_into(whole, whole.view(8 * ctx.rank, {8}))->wait();  // in place
        EXPECT_EQ(staged(), 0u);
        // Overlapping its output elsewhere than its own chunk: the input is staged first.
        c.all_gather_into(whole, whole.view(8 * ((ctx.rank + 1) % kWorld), {8}))->wait();
        EXPECT_EQ(staged(), 4u * 8);
        c.reduce_scatter_into(meta(8), whole, ReduceOp::sum)->wait();
        c.all_reduce(whole, ReduceOp::sum)->wait();
        c.broadcast(meta(5), 1)->wait();
        const int next = (ctx.rank + 1) % kWorld, previous = (ctx.rank + kWorld - 1) % kWorld;
        for (const WorkPtr& w :
             c.batch_p2p({{P2POp::send, meta(3), next}, {P2POp::recv, meta(3), previous}}))
          w->wait();
        const CommCounters& n = c.counters();
        EXPECT_EQ(n.count(CommOp::all_gather), 2u);
        EXPECT_EQ(n.sent(CommOp::all_gather), 2u * 4 * 8 * (kWorld - 1));
        c.all_gather_into(whole, meta(8))->wait();
        EXPECT_EQ(n.count(CommOp::all_gather), 3u);
        EXPECT_EQ(n.count(CommOp::reduce_scatter), 1u);
        EXPECT_EQ(n.count(CommOp::all_reduce), 1u);
        EXPECT_GT(n.total_sent(), 0u);
      },
      kOptions);
}

TEST(LocalMeta, RanksMustAgreeOnWhereBuffersLive) {
  expect_error<Error>(
      [] {
        spawn_ranks(
            2,
            [](RankContext& ctx) {
              const Tensor buffer = ctx.rank == 0 ? meta(4) : Tensor::zeros({4});
              ctx.world.all_reduce(buffer, ReduceOp::sum)->wait();
            },
            kOptions);
      },
      "collective mismatch", "shape-only");
}

}  // namespace
}  // namespace meshtrain
