// One thread that runs a communicator's queued ops in FIFO order beside the caller's compute, as
// a CUDA stream would. A caller about to block on an op may run the queue through that op itself
// (runner_through), while the thread is idle: an op waited for at once (tensor parallelism's,
// a pipeline's receives) then costs no switch to this thread and back, two of the few thread
// wake-ups it is made of. Either way one task runs at a time, in order. Tasks' allocations
// (staging buffers) are charged to the owning rank's tracker, in the comm category.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <thread>

#include "meshtrain/core/memory.h"

namespace meshtrain::local {

class ProgressThread {
 public:
  using Ticket = uint64_t;  // a task's place in the queue, from 1

  explicit ProgressThread(MemoryTracker* tracker);
  // Runs what is still queued, then joins. Tasks must not block forever: every wait has a
  // deadline and wakes on failure or abort.
  ~ProgressThread();
  ProgressThread(const ProgressThread&) = delete;
  ProgressThread& operator=(const ProgressThread&) = delete;

  // Tasks must not throw: each reports its own outcome through its Work.
  Ticket post(std::function<void()> task);

  // A function for AsyncWork::run_on_wait: on its caller's thread, runs the queued tasks through
  // `ticket`, in order, for as long as no other thread is running one (then the caller waits as
  // usual). Safe to call after this object is gone, when it does nothing.
  std::function<void()> runner_through(Ticket ticket) const;

 private:
  struct Queue;
  std::shared_ptr<Queue> queue_;
  std::thread thread_;  // last: started once the queue exists
};

}  // namespace meshtrain::local
