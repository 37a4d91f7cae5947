#include "tests/comm_nccl/nccl_test_support.h"

#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "meshtrain/core/comm/nccl/nccl_world.h"
#include "meshtrain/core/comm/store.h"

namespace meshtrain::nccl_test {

::testing::AssertionResult holds(const Tensor& t, const Values& expected) {
  const std::vector<float> actual = t.to_vector();
  for (int64_t i = 0; i < static_cast<int64_t>(actual.size()); ++i)
    if (actual[i] != expected(i))
      return ::testing::AssertionFailure() << t.describe() << " holds " << actual[i]
                                           << " at element " << i << ", expected " << expected(i);
  return ::testing::AssertionSuccess();
}

void spawn_ranks(int world, const std::function<void(int)>& body) {
  std::mutex mutex;
  std::exception_ptr first_error;
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world; ++rank)
    threads.emplace_back([&, rank] {
      try {
        body(rank);
      } catch (...) {
        std::lock_guard lock(mutex);
        if (!first_error) first_error = std::current_exception();
      }
    });
  for (std::thread& t : threads) t.join();
  if (first_error) std::rethrow_exception(first_error);
}

void run_world(int world, CommOptions options,
               const std::function<void(Communicator&, Device)>& body) {
  InMemoryStore store;
  spawn_ranks(world, [&](int rank) {
    const std::unique_ptr<Communicator> comm = nccl_world(store, rank, world, rank, options);
    body(*comm, Device::cuda(rank));
  });
}

}  // namespace meshtrain::nccl_test
