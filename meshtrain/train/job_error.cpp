#include "meshtrain/train/job_error.h"

#include <algorithm>
#include <thread>
#include <vector>

#include "meshtrain/train/launcher.h"
#include "meshtrain/core/error.h"
#include "meshtrain/config.h"

#if MESHTRAIN_HAS_MPI
#include "meshtrain/core/comm/mpi/mpi_world.h"
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
    // Timed out, the ranks most likely waited on the same lost peer: if rank 0 cannot report,
    // rank 1 does, and each later rank waits one grace more, by which time that report's abort
    // has ended it (the first 8 stagger; the wait stays bounded on a large world).
    const std::chrono::milliseconds waited =
        2 * grace + (timed_out ? std::min(watch.rank() - 1, 8) : 0) * grace;
    std::this_thread::sleep_for(waited);
    mpi_abort(timed_out ? detail::concat(error.what(), "; rank 0 did not end the job within ",
                                         waited.count(), " ms (stopped or hung?)")
                        : std::string(error.what()));
  }
  std::string message = error.what();
  if (timed_out) {
    // Every receive is posted before any is waited for, so a word that arrived counts however
    // long an earlier, silent peer took of the one deadline.
    std::vector<Tensor> heard;
    std::vector<WorkPtr> words;
    for (int peer = 1; peer < watch.size(); ++peer) {
      heard.push_back(Tensor::empty({1}, DType::i32));
      words.push_back(watch.recv(heard.back(), peer));
    }
    std::vector<int> silent;
    const auto deadline = std::chrono::steady_clock::now() + grace;
    for (int peer = 1; peer < watch.size(); ++peer) {
      const auto left = std::max<std::chrono::milliseconds>(
          std::chrono::milliseconds(1), std::chrono::duration_cast<std::chrono::milliseconds>(
                                            deadline - std::chrono::steady_clock::now()));
      try {
        words[peer - 1]->wait(left);
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
