// Every collective of the local backend against closed-form values, over world size x element
// count x dtype.
#include <gtest/gtest.h>

#include <tuple>

#include "meshtrain/core/comm/local/spawn_ranks.h"
#include "meshtrain/core/error.h"
#include "tests/comm/collective_checks.h"

namespace meshtrain {
namespace {

using Params = std::tuple<int, int64_t, DType>;  // world size, elements, dtype

class LocalCollectives : public ::testing::TestWithParam<Params> {
 protected:
  int world() const { return std::get<0>(GetParam()); }
  int64_t count() const { return std::get<1>(GetParam()); }
  DType dtype() const { return std::get<2>(GetParam()); }

  // A hang fails within seconds rather than the default two minutes.
  void run(const std::function<void(Communicator&)>& check) {
    spawn_ranks(world(), [&](RankContext& ctx) { check(ctx.world); },
                CommOptions{std::chrono::seconds(20)});
  }
};

TEST_P(LocalCollectives, AllGather) {
  run([&](Communicator& c) { testing::check_all_gather(c, count(), dtype()); });
}

TEST_P(LocalCollectives, ReduceScatter) {
  run([&](Communicator& c) {
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max})
      testing::check_reduce_scatter(c, count(), dtype(), op);
  });
}

TEST_P(LocalCollectives, AllReduce) {
  run([&](Communicator& c) {
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max})
      testing::check_all_reduce(c, count(), dtype(), op);
  });
}

TEST_P(LocalCollectives, BroadcastFromSeveralRoots) {
  run([&](Communicator& c) {
    for (int root : {0, c.size() - 1, c.size() / 2})
      testing::check_broadcast(c, count(), dtype(), root);
  });
}

TEST_P(LocalCollectives, SendRecvRing) {
  run([&](Communicator& c) { testing::check_send_recv_ring(c, count(), dtype()); });
}

TEST_P(LocalCollectives, AllToAll) {
  run([&](Communicator& c) { testing::check_all_to_all(c, count(), dtype()); });
}

TEST_P(LocalCollectives, Barrier) {
  run([&](Communicator& c) { testing::check_barrier(c); });
}

TEST_P(LocalCollectives, AsyncOverlap) {
  run([&](Communicator& c) { testing::check_async_overlap(c, count(), dtype()); });
}

std::string name_of(const ::testing::TestParamInfo<Params>& info) {
  return detail::concat("w", std::get<0>(info.param), "_n", std::get<1>(info.param), "_",
                        dtype_name(std::get<2>(info.param)));
}

INSTANTIATE_TEST_SUITE_P(Grid, LocalCollectives,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 8),
                                            ::testing::Values<int64_t>(0, 1, 7, 1000, 65536),
                                            ::testing::Values(DType::f32, DType::bf16)),
                         name_of);

}  // namespace
}  // namespace meshtrain
