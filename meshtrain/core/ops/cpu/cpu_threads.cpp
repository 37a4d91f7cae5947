// The CPU kernels' per-thread count and the worker threads that run their parallel parts.
#include "meshtrain/core/ops/cpu/cpu_threads.h"

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

#include "meshtrain/core/awake_wait.h"
#include "meshtrain/core/error.h"

namespace meshtrain::ops::cpu {

namespace {
thread_local int thread_count = 0;  // 0: not set on this thread
thread_local std::chrono::milliseconds part_timeout = kDefaultPartTimeout;
}  // namespace

void set_cpu_threads(int threads) {
  MT_CHECK(threads >= 1 && threads <= kMaxCpuThreads, "CPU threads per rank must be 1 to ",
           kMaxCpuThreads, ", got ", threads);
  thread_count = threads;
}

int cpu_threads() { return thread_count > 0 ? thread_count : std::min(available_cpus(), kMaxCpuThreads); }

void set_cpu_part_timeout(std::chrono::milliseconds timeout) {
  MT_CHECK(timeout.count() > 0, "the CPU part timeout must be positive, got ", timeout.count(),
           " ms");
  part_timeout = timeout;
}

int available_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

namespace {
// Pause instructions a thread spins before it sleeps (tens of microseconds): enough for the
// kernels that follow one another, far from the milliseconds that would take the core from the
// next kernel.
constexpr int kSpinPauses = 1000;

inline void pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

thread_local bool in_job = false;

// A job's parts are claimed, not assigned: every thread of the team, the caller included, takes
// the next unclaimed part until none is left. The claim word packs the job's generation with the
// next part's index, so a claim succeeds only for the job the claimer read: a worker that wakes
// late, after its job finished and the next was published, finds the generation changed and
// claims nothing, rather than running a part of the new job under the old one's function (or the
// same part twice). Since the caller claims too, a job never waits for a sleeping or descheduled
// worker to start a part; it waits only for parts already running.
class Team {
 public:
  ~Team() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
      published_.fetch_add(1);
    }
    wake_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

  // Throws Timeout when a part runs on a worker for longer than `timeout` of awake time; the team
  // must then be abandoned, never destroyed (that would join the stuck worker).
  void run(int n, void (*job)(void*, int), void* context, std::chrono::milliseconds timeout) {
    grow(n - 1);
    uint64_t generation;
    {
      std::lock_guard lock(mutex_);
      generation = published_.load() + 1;
      job_ = job;
      context_ = context;
      parts_ = n;
      unfinished_.store(n);
      claim_.store(generation << kIndexBits);
      published_.store(generation, std::memory_order_release);
    }
    wake_.notify_all();
    in_job = true;
    run_parts(generation, n, job, context);
    in_job = false;
    for (int i = 0; i < kSpinPauses && unfinished_.load(std::memory_order_acquire) != 0; ++i)
      pause();
    if (unfinished_.load(std::memory_order_acquire) != 0) {
      std::unique_lock lock(mutex_);
      if (!wait_awake(done_, lock, timeout, [&] { return unfinished_.load() == 0; }))
        throw Timeout(detail::concat(
            "a CPU kernel part has run for over ", timeout.count(), " ms on a worker thread (",
            unfinished_.load(), " of ", n, " parts unfinished): the thread team is stuck"));
    }
    // Every part has finished, and published error_ before counting itself finished.
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

 private:
  // Part indices take the low bits of the claim word, the generation the rest (2^48 jobs).
  static constexpr int kIndexBits = 16;
  static_assert(kMaxCpuThreads < (1 << kIndexBits));
  static int part_of(uint64_t word) { return static_cast<int>(word & ((1u << kIndexBits) - 1)); }

  // Starts workers until the team has `workers`. A thread that cannot be created is an error here,
  // before the job is published.
  void grow(int workers) {
    while (static_cast<int>(threads_.size()) < workers) {
      try {
        threads_.emplace_back([this] { work(); });
      } catch (const std::system_error& e) {
        throw Error(detail::concat("could not start CPU worker thread ", threads_.size() + 1,
                                   " of ", workers, ": ", e.what()));
      }
    }
  }

  void work() {
    in_job = true;
    uint64_t seen = 0;
    for (;;) {
      for (int i = 0; i < kSpinPauses && published_.load(std::memory_order_acquire) == seen; ++i)
        pause();
      void (*job)(void*, int);
      void* context;
      int parts;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return published_.load() != seen; });
        if (stop_) return;
        // The job, read with the generation it was published under.
        seen = published_.load();
        job = job_;
        context = context_;
        parts = parts_;
      }
      run_parts(seen, parts, job, context);
    }
  }

  // Claims and runs parts of job `generation` until none is left unclaimed.
  void run_parts(uint64_t generation, int parts, void (*job)(void*, int), void* context) {
    for (;;) {
      uint64_t word = claim_.load(std::memory_order_relaxed);
      do {
        if (word >> kIndexBits != generation) return;
        if (part_of(word) >= parts) return;
      } while (!claim_.compare_exchange_weak(word, word + 1, std::memory_order_acq_rel));
      run_part(job, context, part_of(word));
      if (unfinished_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard lock(mutex_);
        done_.notify_one();
      }
    }
  }

  // Runs one part; its exception, the first of the job, is kept for the caller.
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
  std::atomic<uint64_t> published_{0};  // the newest job's generation
  std::atomic<uint64_t> claim_{0};      // generation << kIndexBits | next unclaimed part
  std::atomic<int> unfinished_{0};      // parts of the newest job not yet finished
  // The newest job, written and read under mutex_ with its generation.
  void (*job_)(void*, int) = nullptr;
  void* context_ = nullptr;
  int parts_ = 0;
  bool stop_ = false;
};
}  // namespace

void run_on_threads(int n, void (*job)(void* context, int index), void* context) {
  if (n <= 1 || in_job) {
    for (int i = 0; i < n; ++i) job(context, i);
    return;
  }
  MT_CHECK(n <= kMaxCpuThreads, "run_on_threads: at most ", kMaxCpuThreads, " parts, got ", n);
  thread_local std::unique_ptr<Team> team;
  if (!team) team = std::make_unique<Team>();
  try {
    team->run(n, job, context, part_timeout);
  } catch (const Timeout&) {
    // A stuck worker still runs its part: joining it would hang this thread, so the team is let
    // go (its threads stay, parked or stuck) and the next job starts a new one. The error ends
    // the run.
    team.release();
    throw;
  }
}

}  // namespace meshtrain::ops::cpu
