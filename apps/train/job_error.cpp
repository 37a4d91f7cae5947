#include "apps/train/job_error.h"

#include <algorithm>
#include <thread>
#include <vector>

#include "apps/train/launcher.h"
#include "core/error.h"
#include "meshtrain/config.h"

#if MESHTRAIN_HAS_MPI
#include "core/comm/mpi/mpi_world.h"
#endif

namespace meshtrain {

std::chrono::milliseconds report_grace(std::chrono::milliseconds timeout) {
  return std::min<std::chrono::milliseconds>(std::chrono::seconds(1), timeout / 4);
}

void let_rank_zero_report_first() {
  const std::optional<int> rank = mpirun_rank();
  if (rank && *rank != 0) std::this_thread::sleep_for(2 * report_grace(std::chrono::seconds(120)));
}

#if MESHTRAIN_HAS_MPI
void end_mpi_job(const std::exception& error, Communicator& watch,
                 std::chrono::milliseconds grace) {
  const bool timed_out = dynamic_cast<const Timeout*>(&error) != nullptr;
  const Tensor word = Tensor::zeros({1}, DType::i32);
  if (watch.rank() != 0) {
    if (timed_out) watch.send(word, 0);  // small: it leaves at once, whatever rank 0 does
    std::this_thread::sleep_for(2 * grace);
    mpi_abort(timed_out ? detail::concat(error.what(), "; rank 0 did not end the job within ",
                                         2 * grace.count(), " ms (stopped or hung?)")
                        : std::string(error.what()));
  }
  std::string message = error.what();
  if (timed_out) {
    std::vector<int> silent;
    const auto deadline = std::chrono::steady_clock::now() + grace;
    for (int peer = 1; peer < watch.size(); ++peer) {
      const Tensor heard = Tensor::empty({1}, DType::i32);
      const auto left = std::max<std::chrono::milliseconds>(
          std::chrono::milliseconds(1), std::chrono::duration_cast<std::chrono::milliseconds>(
                                            deadline - std::chrono::steady_clock::now()));
      try {
        watch.recv(heard, peer)->wait(left);
      } catch (const Timeout&) {
        silent.push_back(peer);
      }
    }
    if (!silent.empty()) {
      message += "; no word from";
      for (size_t i = 0; i < silent.size(); ++i)
        message += (i ? ", rank " : " rank ") + std::to_string(silent[i]);
      message += " (stopped, hung or dead)";
    }
  }
  mpi_abort(message);
}
#endif

}  // namespace meshtrain
