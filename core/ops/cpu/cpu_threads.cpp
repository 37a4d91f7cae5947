// The CPU kernels' per-thread count and the worker threads that run their parallel parts.
#include "core/ops/cpu/cpu_threads.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "core/error.h"

namespace meshtrain::ops::cpu {

namespace {
thread_local int thread_count = 0;  // 0: not set on this thread
}  // namespace

void set_cpu_threads(int threads) {
  MT_CHECK_GE(threads, 1, "set_cpu_threads: need at least one thread");
  thread_count = threads;
}

int cpu_threads() { return thread_count > 0 ? thread_count : available_cpus(); }

int available_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

namespace {
// Pause instructions a worker spins for the next job before it sleeps (tens of microseconds):
// enough for the kernels that follow one another, far from the milliseconds that would take the
// core from the next kernel.
constexpr int kSpinPauses = 1000;

inline void pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

thread_local bool in_job = false;

// The workers of one calling thread.
class Team {
 public:
  ~Team() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
      generation_.fetch_add(1);
    }
    wake_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

  void run(int n, void (*job)(void*, int), void* context) {
    while (static_cast<int>(threads_.size()) < n - 1) {
      const int index = static_cast<int>(threads_.size()) + 1;
      threads_.emplace_back([this, index] { work(index); });
    }
    {
      std::lock_guard lock(mutex_);
      job_ = job;
      context_ = context;
      active_ = n;
      remaining_.store(n - 1);
      generation_.fetch_add(1);
    }
    wake_.notify_all();
    in_job = true;
    run_part(job, context, 0);
    in_job = false;
    for (int i = 0; i < kSpinPauses && remaining_.load(std::memory_order_acquire) != 0; ++i)
      pause();
    if (remaining_.load(std::memory_order_acquire) != 0) {
      std::unique_lock lock(mutex_);
      done_.wait(lock, [&] { return remaining_.load() == 0; });
    }
    // Every part has finished (and published error_ before counting itself done).
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

 private:
  void work(int index) {
    in_job = true;
    uint64_t seen = 0;
    for (;;) {
      uint64_t generation = generation_.load(std::memory_order_acquire);
      for (int i = 0; i < kSpinPauses && generation == seen; ++i) {
        pause();
        generation = generation_.load(std::memory_order_acquire);
      }
      if (generation == seen) {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return generation_.load() != seen; });
        generation = generation_.load();
      }
      seen = generation;
      void (*job)(void*, int);
      void* context;
      int active;
      {
        std::lock_guard lock(mutex_);
        if (stop_) return;
        job = job_;
        context = context_;
        active = active_;
      }
      if (index >= active) continue;
      run_part(job, context, index);
      if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard lock(mutex_);
        done_.notify_one();
      }
    }
  }

  // Runs one part; its exception, the first of the run, is kept for the caller.
  void run_part(void (*job)(void*, int), void* context, int index) {
    try {
      job(context, index);
    } catch (...) {
      std::lock_guard lock(error_mutex_);
      if (!error_) error_ = std::current_exception();
    }
  }

  std::vector<std::thread> threads_;
  std::mutex mutex_, error_mutex_;
  std::exception_ptr error_;
  std::condition_variable wake_, done_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> remaining_{0};
  void (*job_)(void*, int) = nullptr;
  void* context_ = nullptr;
  int active_ = 0;
  bool stop_ = false;
};
}  // namespace

void run_on_threads(int n, void (*job)(void* context, int index), void* context) {
  if (n <= 1 || in_job) {
    for (int i = 0; i < n; ++i) job(context, i);
    return;
  }
  thread_local std::unique_ptr<Team> team;
  if (!team) team = std::make_unique<Team>();
  team->run(n, job, context);
}

}  // namespace meshtrain::ops::cpu
