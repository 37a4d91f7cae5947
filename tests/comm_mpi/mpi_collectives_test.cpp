// Every collective of the mpi backend against the closed-form checks the local backend runs too,
// over element count x dtype; the world size is mpirun's -np.
#include <string>
#include <tuple>

#include <gtest/gtest.h>

#include "meshtrain/core/error.h"
#include "tests/comm/collective_checks.h"
#include "tests/comm_mpi/mpi_test_env.h"

namespace meshtrain::mpi_test {
namespace {

namespace checks = meshtrain::testing;
using Params = std::tuple<int64_t, DType>;  // elements, dtype

class MpiCollectives : public MpiTest, public ::testing::WithParamInterface<Params> {
 protected:
  int64_t count() const { return std::get<0>(GetParam()); }
  DType dtype() const { return std::get<1>(GetParam()); }
};

TEST_P(MpiCollectives, AllGather) { checks::check_all_gather(world(), count(), dtype()); }

TEST_P(MpiCollectives, ReduceScatter) {
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max})
    checks::check_reduce_scatter(world(), count(), dtype(), op);
}

TEST_P(MpiCollectives, AllReduce) {
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max})
    checks::check_all_reduce(world(), count(), dtype(), op);
}

TEST_P(MpiCollectives, BroadcastFromSeveralRoots) {
  for (int root : {0, world().size() - 1, world().size() / 2})
    checks::check_broadcast(world(), count(), dtype(), root);
}

TEST_P(MpiCollectives, SendRecvRing) { checks::check_send_recv_ring(world(), count(), dtype()); }

TEST_P(MpiCollectives, AllToAll) { checks::check_all_to_all(world(), count(), dtype()); }

TEST_P(MpiCollectives, Barrier) { checks::check_barrier(world()); }

TEST_P(MpiCollectives, AsyncOverlap) { checks::check_async_overlap(world(), count(), dtype()); }

// The same checks on a sub-communicator: every other rank, in reverse order.
TEST_P(MpiCollectives, OnSplitGroup) {
  const int r = world().rank();
  auto sub = world().split(r % 2, -r, "parity");
  checks::check_all_gather(*sub, count(), dtype());
  checks::check_reduce_scatter(*sub, count(), dtype(), ReduceOp::avg);
  checks::check_all_reduce(*sub, count(), dtype(), ReduceOp::sum);
  checks::check_send_recv_ring(*sub, count(), dtype());
}

std::string name_of(const ::testing::TestParamInfo<Params>& info) {
  return detail::concat("n", std::get<0>(info.param), "_", dtype_name(std::get<1>(info.param)));
}

INSTANTIATE_TEST_SUITE_P(Grid, MpiCollectives,
                         ::testing::Combine(::testing::Values<int64_t>(0, 1, 7, 1000, 65536),
                                            ::testing::Values(DType::f32, DType::bf16)),
                         name_of);

}  // namespace
}  // namespace meshtrain::mpi_test
