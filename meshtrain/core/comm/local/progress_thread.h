// One thread that runs a communicator's queued ops in FIFO order beside the caller's compute, as
// a CUDA stream would. Its allocations (staging buffers) are charged to the owning rank's tracker,
// in the comm category.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "meshtrain/core/memory.h"

namespace meshtrain::local {

class ProgressThread {
 public:
  explicit ProgressThread(MemoryTracker* tracker);
  // Runs what is still queued, then joins. Tasks must not block forever: every wait has a
  // deadline and wakes on failure or abort.
  ~ProgressThread();
  ProgressThread(const ProgressThread&) = delete;
  ProgressThread& operator=(const ProgressThread&) = delete;

  // Tasks must not throw: each reports its own outcome through its Work.
  void post(std::function<void()> task);

 private:
  void run(MemoryTracker* tracker);

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::thread thread_;  // last: started once the members above exist
};

}  // namespace meshtrain::local
