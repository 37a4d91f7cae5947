#include "tests/comm_mpi/mpi_test_env.h"

#include <exception>
#include <sstream>

#include "meshtrain/core/comm/mpi/mpi_world.h"
#include "meshtrain/core/error.h"

namespace meshtrain::mpi_test {

namespace {
Communicator* g_harness = nullptr;
}  // namespace

CommOptions test_options() {
  CommOptions options;
  options.timeout = std::chrono::seconds(10);
  return options;
}

Communicator& harness_comm() {
  MT_CHECK(g_harness, "the MPI test harness communicator is not set (main must set it)");
  return *g_harness;
}

void set_harness_comm(Communicator* comm) { g_harness = comm; }

void MpiTest::SetUp() { world_ = mpi_world(test_options()); }

void MpiTest::TearDown() {
  world_.reset();
  Communicator& harness = harness_comm();
  const int32_t failed = HasFailure() ? 1 : 0;
  Tensor mine = Tensor::from_vector(std::vector<int32_t>{failed}, {1});
  Tensor all = Tensor::empty({harness.size()}, DType::i32);
  try {
    harness.all_gather_into(all, mine)->wait();
  } catch (const std::exception& e) {
    // The ranks no longer run the same tests: nothing sensible can follow.
    mpi_abort(detail::concat("test harness lost its peers: ", e.what()));
  }
  std::ostringstream others;
  for (int r = 0; r < harness.size(); ++r)
    if (all.data<int32_t>()[r] && r != harness.rank()) others << ' ' << r;
  if (!failed && !others.str().empty())
    ADD_FAILURE() << "failed on rank(s)" << others.str() << " (their messages are on stderr)";
}

}  // namespace meshtrain::mpi_test
