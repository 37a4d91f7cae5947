// Batched point-to-point on the nccl backend: the receive-first patterns of a pipeline, in one
// batch per rank, on W ranks as threads with rank r on GPU r (each case skips unless W GPUs are
// visible). Issued as separate calls the same patterns would deadlock on the comm stream, where a
// receive waits for a send queued behind it on the peer; one NCCL group runs them together.
#include <gtest/gtest.h>

#include <chrono>
#include <tuple>

#include "meshtrain/core/error.h"
#include "tests/comm/p2p_checks.h"
#include "tests/comm_nccl/nccl_test_support.h"

namespace meshtrain::nccl_test {
namespace {

using namespace std::chrono_literals;
using meshtrain::testing::P2PIssue;

class NcclP2P : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { MESHTRAIN_REQUIRE_GPUS(GetParam()); }
  int world() const { return GetParam(); }
  // Every pattern at every size, on each rank of a fresh world.
  void run(void (*check)(Communicator&, int64_t, DType, P2PIssue)) {
    run_world(world(), CommOptions{60s}, [&](Communicator& comm, Device) {
      for (DType dtype : {DType::f32, DType::bf16})
        for (int64_t count : {0, 7, 65536}) check(comm, count, dtype, P2PIssue::batched);
    });
  }
};

TEST_P(NcclP2P, RecvFirstRing) { run(meshtrain::testing::check_recv_first_ring); }

TEST_P(NcclP2P, RecvFirstPairs) { run(meshtrain::testing::check_recv_first_pairs); }

TEST_P(NcclP2P, PipelineStep) { run(meshtrain::testing::check_pipeline_step); }

INSTANTIATE_TEST_SUITE_P(WorldSizes, NcclP2P, ::testing::Values(2, 3, 4, 8),
                         [](const auto& info) { return detail::concat("w", info.param); });

// A batch validates every op before it starts any; this needs only one GPU.
TEST(NcclP2PSingleRank, RejectsBadBatchesBeforeStartingAny) {
  MESHTRAIN_REQUIRE_GPUS(1);
  run_world(1, CommOptions{30s}, [](Communicator& comm, Device gpu) {
    EXPECT_TRUE(comm.batch_p2p({}).empty());
    const Tensor host = Tensor::zeros({4});
    EXPECT_THROW(comm.batch_p2p({{P2POp::send, host, 0}}), InvalidArgument);  // host, and itself
    EXPECT_THROW(comm.batch_p2p({{P2POp::recv, Tensor::zeros({4}, DType::f32, gpu), 1}}),
                 InvalidArgument);  // outside the group
    EXPECT_EQ(comm.counters().count(CommOp::send) + comm.counters().count(CommOp::recv), 0u);
  });
}

}  // namespace
}  // namespace meshtrain::nccl_test
