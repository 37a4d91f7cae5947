// Shared state of the MPI test binary (set up by its main) and the fixture every MPI test uses.
#pragma once

#include <memory>

#include <gtest/gtest.h>

#include "meshtrain/core/comm/communicator.h"

namespace meshtrain::mpi_test {

// Short enough that a broken test ends well inside ctest's limit.
CommOptions test_options();

// A world communicator reserved for the harness (failure flags); set by main.
Communicator& harness_comm();
void set_harness_comm(Communicator* comm);

// Gives each test a fresh world communicator (so a test that breaks its group cannot break the
// next), and fails the test on every rank when it failed on any rank.
class MpiTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;
  Communicator& world() { return *world_; }

 private:
  std::unique_ptr<Communicator> world_;
};

}  // namespace meshtrain::mpi_test
