#include "meshtrain/core/comm/local/progress_thread.h"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <system_error>

#include "meshtrain/core/error.h"

namespace meshtrain::local {

struct ProgressThread::Queue {
  explicit Queue(MemoryTracker* owner) : tracker(owner) {}

  // Pops the front task and runs it with the lock released; `running` keeps it the only one.
  void run_front(std::unique_lock<std::mutex>& lock) {
    std::function<void()> task = std::move(tasks.front());
    tasks.pop_front();
    ++started;
    running = true;
    lock.unlock();
    task();
    task = nullptr;  // drop the buffers it holds before anyone waits again
    lock.lock();
    running = false;
  }

  MemoryTracker* const tracker;
  std::mutex mutex;
  std::condition_variable cv;  // the thread waits here for a task it may run, or to stop
  std::deque<std::function<void()>> tasks;
  Ticket posted = 0;   // tasks ever queued
  Ticket started = 0;  // tasks ever taken: the front one's ticket is started + 1
  bool running = false;
  bool stopping = false;
};

ProgressThread::ProgressThread(MemoryTracker* tracker) : queue_(std::make_shared<Queue>(tracker)) {
  try {
    thread_ = std::thread([queue = queue_] {
      MemoryScope memory(queue->tracker);
      MemoryCategoryScope category(MemoryCategory::comm);
      std::unique_lock lock(queue->mutex);
      for (;;) {
        queue->cv.wait(
            lock, [&] { return !queue->running && (queue->stopping || !queue->tasks.empty()); });
        if (queue->tasks.empty()) return;  // stopping, and nothing left to run
        queue->run_front(lock);
      }
    });
  } catch (const std::system_error& e) {
    throw CommError(detail::concat(
        "could not start a communicator's progress thread (one per rank and mesh axis): ",
        e.what(), "; fewer ranks, or a higher thread or memory limit (ulimit -u, -v), would fit"));
  }
}

ProgressThread::~ProgressThread() {
  {
    std::lock_guard lock(queue_->mutex);
    queue_->stopping = true;
  }
  queue_->cv.notify_one();
  thread_.join();
}

ProgressThread::Ticket ProgressThread::post(std::function<void()> task) {
  Ticket ticket;
  {
    std::lock_guard lock(queue_->mutex);
    queue_->tasks.push_back(std::move(task));
    ticket = ++queue_->posted;
  }
  queue_->cv.notify_one();
  return ticket;
}

std::function<void()> ProgressThread::runner_through(Ticket ticket) const {
  return [weak = std::weak_ptr<Queue>(queue_), ticket] {
    const std::shared_ptr<Queue> queue = weak.lock();
    if (!queue) return;
    MemoryScope memory(queue->tracker);
    MemoryCategoryScope category(MemoryCategory::comm);
    std::unique_lock lock(queue->mutex);
    if (queue->running || queue->started >= ticket) return;
    while (queue->started < ticket) queue->run_front(lock);
    // The thread may have woken meanwhile and seen us running: what is left (or its stop) is its
    // again.
    if (!queue->tasks.empty() || queue->stopping) queue->cv.notify_one();
  };
}

}  // namespace meshtrain::local
