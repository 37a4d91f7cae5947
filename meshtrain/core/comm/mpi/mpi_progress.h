// The progress thread of one MPI communicator. It posts the communicator's nonblocking MPI ops in
// issue order (so every rank posts them in the same order) and polls them with MPI_Test, so that
// they move on beside the caller's compute and several can be in flight (a send and a recv between
// the same pair of ranks, say). It never waits on one request: a receive whose sender is late
// holds up neither the ops queued after it nor the other requests' completion. An op not complete
// by its deadline fails with Timeout; the group is unusable from then on, since its members no
// longer agree on which ops are posted.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <mpi.h>

#include "meshtrain/core/comm/work.h"

namespace meshtrain {

struct MpiOp {
  std::shared_ptr<AsyncWork> work;
  std::function<MPI_Request()> start;  // stages inputs and posts the op (on the progress thread)
  // Checks what arrived (status) and unstages outputs once the op is complete; may be empty.
  std::function<void(const MPI_Status& status)> finish;
};

class MpiProgress {
 public:
  explicit MpiProgress(std::chrono::milliseconds timeout);
  ~MpiProgress();  // calls shutdown(false) unless it was called
  MpiProgress(const MpiProgress&) = delete;
  MpiProgress& operator=(const MpiProgress&) = delete;

  void enqueue(MpiOp op);
  // Queues the ops as one unit, so that the progress thread posts them all before it polls any
  // (the ops of one batch start together).
  void enqueue(std::vector<MpiOp> ops);

  // Stops the thread. Unless abandon, ops in flight first run to completion or to their deadline.
  // Returns true when no request is left posted, so the MPI communicator may be freed; otherwise
  // the buffers of the ops left posted are kept alive for good (MPI may still write into them).
  bool shutdown(bool abandon);

 private:
  struct InFlight {
    MpiOp op;
    MPI_Request request;
    std::chrono::steady_clock::time_point deadline;
    bool expired = false;  // its work already failed with Timeout; polled only to release it
  };

  void run();
  void post(MpiOp& op);
  bool poll();  // returns whether an op completed
  void fail_group(const std::exception_ptr& error);

  std::chrono::milliseconds timeout_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<MpiOp> queue_;
  bool stopping_ = false;
  bool abandon_ = false;
  // Owned by the progress thread.
  std::vector<InFlight> in_flight_;
  std::string broken_;  // the first failure; later ops fail unposted, naming it
  std::thread thread_;
  bool clean_ = true;
  bool shut_down_ = false;
};

}  // namespace meshtrain
