// Keeps gtest's output to rank 0: other ranks print only their failed assertions, prefixed with
// their rank, on stderr.
#pragma once

namespace meshtrain::mpi_test {

// Call after InitGoogleTest, before RUN_ALL_TESTS.
void quiet_unless_rank_zero(int rank);

}  // namespace meshtrain::mpi_test
