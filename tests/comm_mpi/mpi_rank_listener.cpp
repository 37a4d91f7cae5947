#include "tests/comm_mpi/mpi_rank_listener.h"

#include <cstdio>
#include <string>

#include <gtest/gtest.h>

namespace meshtrain::mpi_test {

namespace {
class FailuresOnly : public ::testing::EmptyTestEventListener {
 public:
  explicit FailuresOnly(int rank) : rank_(rank) {}

  // Remembered here: gtest holds its lock while it reports a result, so it cannot be asked then.
  void OnTestStart(const ::testing::TestInfo& test) override {
    test_ = std::string(test.test_suite_name()) + "." + test.name();
  }

  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s: %s:%d: %s\n", rank_, test_.c_str(),
                 result.file_name() ? result.file_name() : "?", result.line_number(),
                 result.message());
    std::fflush(stderr);
  }

 private:
  int rank_;
  std::string test_;
};
}  // namespace

void quiet_unless_rank_zero(int rank) {
  if (rank == 0) return;
  auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
  delete listeners.Release(listeners.default_result_printer());
  listeners.Append(new FailuresOnly(rank));
}

}  // namespace meshtrain::mpi_test
