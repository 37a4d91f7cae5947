// Receive-first point-to-point on the local backend, over world size x element count (0 included)
// x dtype x how the transfers are issued (separate calls or one batch): a receive must not hold up
// the sends issued after it, or every pattern here would time out.
#include <gtest/gtest.h>

#include <tuple>

#include "meshtrain/core/comm/local/spawn_ranks.h"
#include "meshtrain/core/error.h"
#include "tests/comm/p2p_checks.h"

namespace meshtrain {
namespace {

using testing::P2PIssue;
using Params = std::tuple<int, int64_t, DType, P2PIssue>;

class LocalP2P : public ::testing::TestWithParam<Params> {
 protected:
  int world() const { return std::get<0>(GetParam()); }
  int64_t count() const { return std::get<1>(GetParam()); }
  DType dtype() const { return std::get<2>(GetParam()); }
  P2PIssue issue() const { return std::get<3>(GetParam()); }

  // A deadlock fails within seconds rather than the default two minutes.
  void run(const std::function<void(Communicator&)>& check) {
    spawn_ranks(world(), [&](RankContext& ctx) { check(ctx.world); },
                CommOptions{std::chrono::seconds(10)});
  }
};

TEST_P(LocalP2P, RecvFirstRing) {
  run([&](Communicator& c) { testing::check_recv_first_ring(c, count(), dtype(), issue()); });
}

TEST_P(LocalP2P, RecvFirstPairs) {
  run([&](Communicator& c) { testing::check_recv_first_pairs(c, count(), dtype(), issue()); });
}

TEST_P(LocalP2P, PipelineStep) {
  run([&](Communicator& c) { testing::check_pipeline_step(c, count(), dtype(), issue()); });
}

std::string name_of(const ::testing::TestParamInfo<Params>& info) {
  const auto& [world, count, dtype, issue] = info.param;
  return detail::concat("w", world, "_n", count, "_", dtype_name(dtype), "_",
                        issue == P2PIssue::batched ? "batched" : "separate");
}

INSTANTIATE_TEST_SUITE_P(Grid, LocalP2P,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 8),
                                            ::testing::Values<int64_t>(0, 7, 65536),
                                            ::testing::Values(DType::f32, DType::bf16),
                                            ::testing::Values(P2PIssue::separate,
                                                              P2PIssue::batched)),
                         name_of);

}  // namespace
}  // namespace meshtrain
