// The local backend's progress thread and the waiter that runs its own op: tasks run once each, in
// order, one at a time, on whichever thread; a waiter runs nothing past its own op, nothing while
// the thread runs a task, and nothing once the thread is gone; what it runs is charged to the
// rank's tracker as communication and counted as time waited.
#include "meshtrain/core/comm/local/progress_thread.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "meshtrain/core/comm/work.h"
#include "meshtrain/core/error.h"

namespace meshtrain::local {
namespace {

using namespace std::chrono_literals;

// What each task saw: its number, the thread it ran on, the tracker and category charged.
struct TaskRun {
  int task = 0;
  std::thread::id thread;
  MemoryTracker* tracker = nullptr;
  MemoryCategory category = MemoryCategory::other;
};

class RunLog {
 public:
  std::function<void()> task(int number) {
    return [this, number] {
      std::lock_guard lock(mutex_);
      runs_.push_back({number, std::this_thread::get_id(), current_memory_tracker(),
                       current_memory_category()});
    };
  }
  size_t size() const {
    std::lock_guard lock(mutex_);
    return runs_.size();
  }
  std::vector<TaskRun> runs() const {
    std::lock_guard lock(mutex_);
    return runs_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<TaskRun> runs_;
};

// The waiter usually wins the race with the thread's wake-up; over many rounds it must win some.
TEST(ProgressThread, AWaiterRunsItsTaskAndThoseBeforeItNothingAfter) {
  constexpr int kRounds = 300, kPerRound = 3;
  MemoryTracker rank_tracker;
  RunLog log;
  {
    ProgressThread progress(&rank_tracker);
    for (int round = 0; round < kRounds; ++round) {
      const int first = round * kPerRound;
      progress.post(log.task(first));
      const ProgressThread::Ticket mine = progress.post(log.task(first + 1));
      progress.post(log.task(first + 2));
      progress.runner_through(mine)();
      // The round's last task is the thread's: wait for it, so no later waiter may run it.
      while (log.size() < static_cast<size_t>(first + kPerRound))
        std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  const std::vector<TaskRun> runs = log.runs();
  ASSERT_EQ(runs.size(), size_t{kRounds * kPerRound});
  int by_waiter = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    EXPECT_EQ(runs[i].task, static_cast<int>(i)) << "tasks run once each, in order";
    EXPECT_EQ(runs[i].tracker, &rank_tracker);
    EXPECT_EQ(runs[i].category, MemoryCategory::comm);
    if (runs[i].thread != std::this_thread::get_id()) continue;
    ++by_waiter;
    EXPECT_NE(runs[i].task % kPerRound, kPerRound - 1) << "the waiter ran a task after its own";
  }
  EXPECT_GT(by_waiter, 0) << "no waiter ever ran its own op in " << kRounds << " rounds";
}

TEST(ProgressThread, AWaiterLeavesTheQueueToTheThreadWhileItRunsATask) {
  MemoryTracker rank_tracker;
  RunLog log;
  std::atomic<bool> started = false, release = false;
  {
    ProgressThread progress(&rank_tracker);
    progress.post([&] {
      started = true;
      while (!release) std::this_thread::sleep_for(1ms);
    });
    while (!started) std::this_thread::sleep_for(1ms);
    const ProgressThread::Ticket mine = progress.post(log.task(1));
    progress.runner_through(mine)();  // returns at once: the thread is busy
    EXPECT_TRUE(log.runs().empty());
    release = true;
  }
  const std::vector<TaskRun> runs = log.runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_NE(runs[0].thread, std::this_thread::get_id());
}

TEST(ProgressThread, ARunnerOutlivingItsThreadDoesNothing) {
  RunLog log;
  std::function<void()> runner;
  {
    ProgressThread progress(nullptr);
    runner = progress.runner_through(progress.post(log.task(1)));
  }
  runner();
  ASSERT_EQ(log.runs().size(), 1u);
}

// AsyncWork's side: the op runs on the waiting thread once, counted as time waited, and only when
// the wait may last as long as the op's own deadline.
TEST(AsyncWorkRunOnWait, RunsOnceOnTheWaitingThreadAndCountsAsWaiting) {
  AsyncWork work("test op", std::chrono::milliseconds(5000));
  int runs = 0;
  work.run_on_wait([&] {
    ++runs;
    std::this_thread::sleep_for(20ms);
    work.complete();
  });
  const double waited_before = comm_wait_seconds();
  work.wait();
  work.wait();
  EXPECT_EQ(runs, 1);
  EXPECT_GE(comm_wait_seconds() - waited_before, 0.02);
}

TEST(AsyncWorkRunOnWait, NotForAWaitShorterThanTheOpsDeadline) {
  AsyncWork work("test op", std::chrono::milliseconds(5000));
  bool ran = false;
  work.run_on_wait([&] { ran = true; });
  EXPECT_THROW(work.wait(std::chrono::milliseconds(10)), Timeout);
  EXPECT_FALSE(ran);
  work.complete();
}

TEST(AsyncWorkRunOnWait, NotForAnOpAlreadyComplete) {
  AsyncWork work("test op", std::chrono::milliseconds(5000));
  bool ran = false;
  work.run_on_wait([&] { ran = true; });
  work.complete();
  work.wait();
  EXPECT_FALSE(ran);
}

}  // namespace
}  // namespace meshtrain::local
