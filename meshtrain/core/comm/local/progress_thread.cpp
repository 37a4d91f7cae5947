#include "meshtrain/core/comm/local/progress_thread.h"

#include <system_error>

#include "meshtrain/core/error.h"

namespace meshtrain::local {

ProgressThread::ProgressThread(MemoryTracker* tracker) {
  try {
    thread_ = std::thread([this, tracker] { run(tracker); });
  } catch (const std::system_error& e) {
    throw CommError(detail::concat(
        "could not start a communicator's progress thread (one per rank and mesh axis): ",
        e.what(), "; fewer ranks, or a higher thread or memory limit (ulimit -u, -v), would fit"));
  }
}

ProgressThread::~ProgressThread() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

void ProgressThread::post(std::function<void()> task) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(task));
  }
  cv_.notify_one();
}

void ProgressThread::run(MemoryTracker* tracker) {
  MemoryScope memory(tracker);
  MemoryCategoryScope category(MemoryCategory::comm);
  std::unique_lock lock(mutex_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and nothing left to run
    std::function<void()> task = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    task();
    task = nullptr;  // drop the buffers it holds before waiting again
    lock.lock();
  }
}

}  // namespace meshtrain::local
