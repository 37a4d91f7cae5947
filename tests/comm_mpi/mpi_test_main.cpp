// main of the MPI test binary: one process per rank under mpirun. The job fails when any rank
// fails; an error outside the tests ends every rank at once.
#include <exception>

#include <gtest/gtest.h>

#include "meshtrain/core/comm/mpi/mpi_world.h"
#include "tests/comm_mpi/mpi_rank_listener.h"
#include "tests/comm_mpi/mpi_test_env.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  try {
    auto harness = meshtrain::mpi_world(meshtrain::mpi_test::test_options());
    meshtrain::mpi_test::set_harness_comm(harness.get());
    meshtrain::mpi_test::quiet_unless_rank_zero(harness->rank());
    const int rc = RUN_ALL_TESTS();
    auto failed = meshtrain::Tensor::from_vector(std::vector<int32_t>{rc != 0 ? 1 : 0}, {1});
    harness->all_reduce(failed, meshtrain::ReduceOp::max)->wait();
    meshtrain::mpi_test::set_harness_comm(nullptr);
    return failed.data<int32_t>()[0];
  } catch (const std::exception& e) {
    meshtrain::mpi_abort(e.what());
  }
}
