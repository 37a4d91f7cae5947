// Helpers for the nccl backend's tests: closed-form buffers on a GPU, exact comparisons, GPU
// counts and ranks as threads.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <memory>

#include "meshtrain/core/comm/communicator.h"
#include "meshtrain/core/device_memory.h"
#include "meshtrain/core/tensor.h"
#include "tests/comm/collective_checks.h"

namespace meshtrain::nccl_test {

using Values = std::function<float(int64_t)>;

// Skips the test unless at least n GPUs are visible (NCCL needs one GPU per rank).
#define MESHTRAIN_REQUIRE_GPUS(n)                                                      \
  do {                                                                                 \
    if (::meshtrain::cuda_device_count() < (n))                                        \
      GTEST_SKIP() << "needs " << (n) << " GPUs, " << ::meshtrain::cuda_device_count() \
                   << " visible";                                                      \
  } while (0)

// A 1-D tensor of n elements on device holding values(i), as dtype (the tests only use values
// that bf16 and i32 hold exactly): the collective checks' helper.
using ::meshtrain::testing::filled;
// Passes when every element of t (read back to the host) equals expected(i); otherwise names the
// first mismatch.
::testing::AssertionResult holds(const Tensor& t, const Values& expected);

// Runs body(rank) on one thread per rank and rethrows the first failure once all have finished.
void spawn_ranks(int world, const std::function<void(int)>& body);
// Runs body(comm, gpu) on every rank of a fresh nccl world of the given size, rank r on GPU r.
void run_world(int world, CommOptions options,
               const std::function<void(Communicator&, Device)>& body);

}  // namespace meshtrain::nccl_test
