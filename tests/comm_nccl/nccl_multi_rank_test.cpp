// The nccl backend with W ranks as threads of this process, rank r on GPU r (NCCL needs a GPU per
// rank): each case skips unless W GPUs are visible.
#include <gtest/gtest.h>

#include <chrono>

#include "meshtrain/core/comm/nccl/nccl_world.h"
#include "meshtrain/core/error.h"
#include "tests/comm_nccl/nccl_collective_checks.h"
#include "tests/comm_nccl/nccl_test_support.h"

namespace meshtrain::nccl_test {
namespace {

using namespace std::chrono_literals;

class NcclMultiRank : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { MESHTRAIN_REQUIRE_GPUS(GetParam()); }
  int world() const { return GetParam(); }
  static CommOptions options() { return CommOptions{60s}; }
};

TEST_P(NcclMultiRank, EveryOpGivesItsClosedFormValues) {
  run_world(world(), options(), [&](Communicator& comm, Device gpu) {
    EXPECT_EQ(comm.size(), world());
    for (DType dtype : {DType::f32, DType::bf16})
      for (int64_t count : {0, 1, 7, 1000, 65536}) check_every_op(comm, gpu, dtype, count);
    check_all_reduce(comm, gpu, DType::i32, 1000, ReduceOp::sum);
  });
}

// Even ranks send first and odd ranks receive first, so the ring never waits on itself.
TEST_P(NcclMultiRank, SendsAroundARing) {
  run_world(world(), options(), [&](Communicator& comm, Device gpu) {
    const int rank = comm.rank();
    const int next = (rank + 1) % world();
    const int previous = (rank + world() - 1) % world();
    for (DType dtype : {DType::f32, DType::bf16})
      for (int64_t count : {1, 7, 1000, 65536}) {
        const Tensor mine =
            filled(count, dtype, gpu, [&](int64_t i) { return contribution(rank, i); });
        const Tensor theirs = filled(count, dtype, gpu, [](int64_t) { return -1.0f; });
        const CommCounters before = comm.counters();
        if (rank % 2 == 0) {
          comm.send(mine, next)->wait();
          comm.recv(theirs, previous)->wait();
        } else {
          comm.recv(theirs, previous)->wait();
          comm.send(mine, next)->wait();
        }
        EXPECT_TRUE(holds(theirs, [&](int64_t i) { return contribution(previous, i); }))
            << "rank " << rank << " from " << previous;
        EXPECT_EQ(comm.counters().sent(CommOp::send) - before.sent(CommOp::send), mine.nbytes());
        EXPECT_EQ(comm.counters().received(CommOp::recv) - before.received(CommOp::recv),
                  theirs.nbytes());
      }
  });
}

// Odd and even ranks form two groups, each ordered by descending rank (key = -rank).
TEST_P(NcclMultiRank, SplitsIntoEvenAndOddGroups) {
  run_world(world(), options(), [&](Communicator& comm, Device gpu) {
    const int rank = comm.rank();
    const std::unique_ptr<Communicator> half = comm.split(rank % 2, -rank, "half");
    std::vector<int> expected;
    for (int r = world() - 1; r >= 0; --r)
      if (r % 2 == rank % 2) expected.push_back(r);
    EXPECT_EQ(half->world_ranks(), expected);
    EXPECT_EQ(half->size(), world() / 2);
    EXPECT_EQ(half->world_rank(), rank);
    check_every_op(*half, gpu, DType::f32, 1000);
    check_all_reduce(comm, gpu, DType::f32, 1000, ReduceOp::sum);  // the parent still works
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, NcclMultiRank, ::testing::Values(2, 4, 8),
                         [](const auto& info) { return detail::concat("w", info.param); });

// Rank 1 never joins the all-reduce: rank 0's wait must time out, naming the op, and abort.
TEST(NcclTwoRanks, WaitTimesOutWhenAPeerSkipsTheOp) {
  MESHTRAIN_REQUIRE_GPUS(2);
  run_world(2, CommOptions{5s}, [&](Communicator& comm, Device gpu) {
    if (comm.rank() != 0) return;
    const Tensor buffer = Tensor::zeros({1024}, DType::f32, gpu);
    const WorkPtr work = comm.all_reduce(buffer, ReduceOp::sum);
    try {
      work->wait(1s);
      ADD_FAILURE() << "the all-reduce finished without rank 1";
    } catch (const Timeout& e) {
      EXPECT_NE(std::string(e.what()).find("all_reduce"), std::string::npos) << e.what();
    }
    EXPECT_THROW(comm.barrier(), CommError);
  });
}

}  // namespace
}  // namespace meshtrain::nccl_test
