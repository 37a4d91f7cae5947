// Point-to-point on the mpi backend at mpirun's world size: the receive-first patterns of a
// pipeline (the checks the local backend runs too), messages of the wrong size, a silent peer,
// and a pending receive that must not hold up later ops.
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "meshtrain/core/comm/mpi/mpi_world.h"
#include "meshtrain/core/error.h"
#include "tests/comm/p2p_checks.h"
#include "tests/comm_mpi/mpi_test_env.h"
#include "tests/support/error_message.h"

namespace meshtrain::mpi_test {
namespace {

namespace checks = meshtrain::testing;
using checks::P2PIssue;
using meshtrain::testing::expect_error;
using Params = std::tuple<int64_t, DType, P2PIssue>;  // elements, dtype, how issued

Tensor full(int64_t n, float value) {
  return Tensor::from_vector(std::vector<float>(static_cast<size_t>(n), value), {n});
}

class MpiP2P : public MpiTest, public ::testing::WithParamInterface<Params> {
 protected:
  int64_t count() const { return std::get<0>(GetParam()); }
  DType dtype() const { return std::get<1>(GetParam()); }
  P2PIssue issue() const { return std::get<2>(GetParam()); }
};

TEST_P(MpiP2P, RecvFirstRing) { checks::check_recv_first_ring(world(), count(), dtype(), issue()); }

TEST_P(MpiP2P, RecvFirstPairs) {
  checks::check_recv_first_pairs(world(), count(), dtype(), issue());
}

TEST_P(MpiP2P, PipelineStep) { checks::check_pipeline_step(world(), count(), dtype(), issue()); }

std::string name_of(const ::testing::TestParamInfo<Params>& info) {
  const auto& [count, dtype, issue] = info.param;
  return detail::concat("n", count, "_", dtype_name(dtype), "_",
                        issue == P2PIssue::batched ? "batched" : "separate");
}

INSTANTIATE_TEST_SUITE_P(Grid, MpiP2P,
                         ::testing::Combine(::testing::Values<int64_t>(0, 7, 65536),
                                            ::testing::Values(DType::f32, DType::bf16),
                                            ::testing::Values(P2PIssue::separate,
                                                              P2PIssue::batched)),
                         name_of);

using MpiP2PFailure = MpiTest;

// MPI itself reports a message longer than the receive buffer (truncation).
TEST_F(MpiP2PFailure, LongerMessageFailsTheRecv) {
  if (world().size() == 1) GTEST_SKIP() << "needs a peer";
  if (world().rank() == 0) world().batch_p2p({{P2POp::send, full(16, 1.0f), 1}})[0]->wait();
  if (world().rank() == 1)
    expect_error<CommError>(
        [&] {
          world().batch_p2p({{P2POp::recv, full(8, 0.0f), 0}})[0]->wait();
        },
        "recv of 32 bytes from rank 0 on group 'world'");
}

// A shorter one MPI accepts silently; the backend checks the size that arrived.
TEST_F(MpiP2PFailure, ShorterMessageFailsTheRecvNamingBothSizes) {
  if (world().size() == 1) GTEST_SKIP() << "needs a peer";
  if (world().rank() == 0) world().batch_p2p({{P2POp::send, full(8, 1.0f), 1}})[0]->wait();
  if (world().rank() == 1)
    expect_error<CommError>(
        [&] {
          world().batch_p2p({{P2POp::recv, full(16, 0.0f), 0}})[0]->wait();
        },
        "recv of 64 bytes from rank 0",
        "rank 0 sent 32 bytes but this recv expects 64 bytes (f32)");
}

// Past CommOptions::timeout a receive whose sender never comes fails with Timeout naming it.
TEST_F(MpiP2PFailure, RecvFromASilentPeerTimesOutNamingIt) {
  if (world().size() == 1) GTEST_SKIP() << "needs a peer";
  CommOptions options;
  options.timeout = std::chrono::milliseconds(200);
  auto group = mpi_world(options);
  const Tensor in = full(8, 0.0f);
  if (group->rank() == 1) {
    const WorkPtr received = group->batch_p2p({{P2POp::recv, in, 0}})[0];
    const auto start = std::chrono::steady_clock::now();
    expect_error<Timeout>([&] { received->wait(std::chrono::seconds(10)); },
                          "timed out after 200 ms waiting for recv of 32 bytes from rank 0 on group "
                          "'world'");
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  }
  harness_comm().barrier()->wait();
  // Rank 0's late send matches the expired receive, so that both ranks can free the group.
  if (group->rank() == 0) group->send(full(8, 1.0f), 1)->wait();
}

// A receive whose sender comes late leaves the ops queued behind it free to run: the sender sends
// only after a collective that the receiving rank issued after its receive.
TEST_F(MpiP2PFailure, PendingRecvDoesNotHoldUpLaterCollectives) {
  const int w = world().size();
  if (w == 1) GTEST_SKIP() << "needs a peer";
  const int r = world().rank();
  const Tensor in = full(5, 0.0f);
  WorkPtr received;
  if (r == 0) received = world().recv(in, w - 1);
  Tensor sum = full(1, static_cast<float>(r));
  world().all_reduce(sum, ReduceOp::sum)->wait();
  EXPECT_EQ(sum.to_vector()[0], static_cast<float>(w * (w - 1) / 2));
  if (r == w - 1) world().send(full(5, 7.0f), 0)->wait();
  if (r == 0) {
    received->wait();
    EXPECT_EQ(in.to_vector(), std::vector<float>(5, 7.0f));
  }
}

}  // namespace
}  // namespace meshtrain::mpi_test
