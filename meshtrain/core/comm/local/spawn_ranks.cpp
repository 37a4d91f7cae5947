#include "meshtrain/core/comm/local/spawn_ranks.h"

#include <algorithm>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "meshtrain/core/comm/local/local_world.h"
#include "meshtrain/core/error.h"
#include "meshtrain/core/ops/cpu/cpu_threads.h"

namespace meshtrain {

namespace {

std::string reason_of(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown exception";
  }
}

bool is_secondary(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const PeerFailure&) {
    return true;
  } catch (...) {
    return false;
  }
}

// Failures in the order they happened; the first root cause wins over any secondary failure.
class FailureLog {
 public:
  void record(std::exception_ptr error) {
    std::lock_guard lock(mutex_);
    auto& slot = is_secondary(error) ? first_secondary_ : first_root_;
    if (!slot) slot = std::move(error);
  }
  void rethrow_first() const {
    if (first_root_) std::rethrow_exception(first_root_);
    if (first_secondary_) std::rethrow_exception(first_secondary_);
  }

 private:
  std::mutex mutex_;
  std::exception_ptr first_root_;
  std::exception_ptr first_secondary_;
};

}  // namespace

void spawn_ranks(int world_size, const std::function<void(RankContext&)>& fn,
                 CommOptions options) {
  MT_CHECK(world_size >= 1, "spawn_ranks needs at least one rank, got ", world_size);
  // The ranks split the caller's CPU threads; the count is per thread, so each rank thread sets it
  // for itself.
  const int rank_cpu_threads = std::max(1, ops::cpu::cpu_threads() / world_size);
  // Before the world: buffers the world still holds are charged to these trackers.
  std::vector<MemoryTracker> trackers(world_size);
  LocalWorld world(world_size, options);
  FailureLog failures;
  std::vector<std::thread> threads;
  threads.reserve(world_size);
  const auto run_rank = [&](int rank) {
    MemoryScope memory(&trackers[rank]);
    ops::cpu::set_cpu_threads(rank_cpu_threads);
    ops::cpu::set_cpu_part_timeout(options.timeout);
    // Declared outside the try: the rank's failure is logged and the world aborted before its
    // communicator goes away, so peers see the abort rather than a vanished communicator.
    std::unique_ptr<Communicator> comm;
    try {
      comm = world.communicator(rank);
      RankContext ctx{rank, world_size, *comm, trackers[rank]};
      fn(ctx);
    } catch (...) {
      const std::exception_ptr error = std::current_exception();
      failures.record(error);
      world.abort(rank, reason_of(error));
    }
  };
  for (int rank = 0; rank < world_size; ++rank) {
    try {
      threads.emplace_back(run_rank, rank);
    } catch (const std::system_error& e) {
      // The ranks already started would wait for this one until their timeout: abort the world
      // so that they end now, then report the cause once they have.
      const std::string reason =
          detail::concat("could not start the thread of rank ", rank, " of ", world_size, ": ",
                         e.what(), "; fewer ranks, or a higher thread or memory limit (ulimit -u, -v), would fit");
      failures.record(std::make_exception_ptr(Error(reason)));
      world.abort(rank, reason);
      break;
    }
  }
  for (std::thread& t : threads) t.join();
  failures.rethrow_first();
}

}  // namespace meshtrain
