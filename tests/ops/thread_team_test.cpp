// The CPU thread team (meshtrain/core/ops/cpu/cpu_threads.h): every part of every job runs exactly once,
// whatever the jobs' widths and however many more threads than cores; exceptions and a stuck part
// reach the caller.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "meshtrain/core/error.h"
#include "meshtrain/core/ops/cpu/cpu_threads.h"
#include "tests/support/error_message.h"

namespace meshtrain {
namespace {

constexpr int kWidest = 16;

// One job: which parts ran, and how often.
struct Job {
  int id = 0;
  std::array<std::atomic<int>, kWidest> runs{};
};

void count_part(void* context, int index) { static_cast<Job*>(context)->runs[index].fetch_add(1); }

// Runs `jobs` jobs whose widths cycle through 2..kWidest in an order that makes neighbours differ
// (a narrow job after a wide one left idle workers that must not take the next job's parts), and
// checks that each part ran exactly once.
void expect_each_part_once(int jobs) {
  for (int j = 0; j < jobs; ++j) {
    const int width = 2 + (j * 7) % (kWidest - 1);
    Job job;
    job.id = j;
    ops::cpu::run_on_threads(width, count_part, &job);
    for (int i = 0; i < kWidest; ++i)
      ASSERT_EQ(job.runs[i].load(), i < width ? 1 : 0)
          << "job " << j << " of width " << width << ", part " << i;
  }
}

// The race fixed in issue 25: a worker idle during a narrow job saw the next job published between
// reading the generation and reading the job, and ran its part twice (a hang or wrong results).
// More threads than this machine's cores make the interleaving likely.
TEST(ThreadTeam, EveryPartRunsOnceAcrossThousandsOfJobsOfVaryingWidth) {
  expect_each_part_once(20000);
}

// Teams on several calling threads at once (the local backend's ranks), each with more threads
// than the machine has cores.
TEST(ThreadTeam, ConcurrentTeamsOfMoreThreadsThanCores) {
  std::vector<std::thread> callers;
  for (int c = 0; c < 3; ++c) callers.emplace_back([] { expect_each_part_once(3000); });
  for (std::thread& t : callers) t.join();
}

// A part that starts a job of its own runs it inline, on its own thread.
TEST(ThreadTeam, NestedJobsRunOnTheCallingPart) {
  struct Outer {
    std::array<Job, 4> inner;
  } outer;
  ops::cpu::run_on_threads(
      4,
      [](void* context, int index) {
        ops::cpu::run_on_threads(3, count_part, &static_cast<Outer*>(context)->inner[index]);
      },
      &outer);
  for (const Job& job : outer.inner)
    for (int i = 0; i < 3; ++i) EXPECT_EQ(job.runs[i].load(), 1);
}

// A part that throws, on a worker or on the caller, reaches the caller as that exception once
// every part is done; the threads then run the next job as usual.
TEST(ThreadTeam, APartsExceptionReachesTheCaller) {
  for (const int throwing : {0, 1, 5}) {
    struct Context {
      int throwing;
      std::atomic<int> ran{0};
    } context{throwing};
    const auto job = [](void* c, int index) {
      auto& ctx = *static_cast<Context*>(c);
      ctx.ran.fetch_add(1);
      if (index == ctx.throwing) throw InvalidArgument("part " + std::to_string(index));
    };
    try {
      ops::cpu::run_on_threads(6, job, &context);
      ADD_FAILURE() << "no exception from part " << throwing;
    } catch (const InvalidArgument& e) {
      EXPECT_EQ(std::string(e.what()).find("part " + std::to_string(throwing)), 0u) << e.what();
    }
    EXPECT_EQ(context.ran.load(), 6);
  }
  expect_each_part_once(10);
}

// A part stuck on a worker ends the wait with Timeout after the calling thread's part timeout,
// rather than hanging; the caller's next job runs on a new team.
TEST(ThreadTeam, AStuckPartIsATimeoutNotAHang) {
  // The stuck part outlives this test's frame: its context is never freed.
  struct Stuck {
    std::atomic<int> started{0};
    std::atomic<bool> release{false};
    std::thread::id caller;
  };
  auto* stuck = new Stuck;
  stuck->caller = std::this_thread::get_id();
  ops::cpu::set_cpu_part_timeout(std::chrono::milliseconds(300));
  const auto job = [](void* c, int) {
    auto& s = *static_cast<Stuck*>(c);
    s.started.fetch_add(1);
    while (s.started.load() < 2) std::this_thread::yield();  // two threads, one part each
    if (std::this_thread::get_id() != s.caller)
      while (!s.release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  };
  const auto begin = std::chrono::steady_clock::now();
  testing::expect_error<Timeout>([&] { ops::cpu::run_on_threads(2, job, stuck); },
                                 "has run for over 300 ms on a worker thread");
  EXPECT_GE(std::chrono::steady_clock::now() - begin, std::chrono::milliseconds(300));
  stuck->release.store(true);
  ops::cpu::set_cpu_part_timeout(ops::cpu::kDefaultPartTimeout);
  expect_each_part_once(100);
}

TEST(ThreadTeam, ThreadCountsOutsideTheBoundAreRefused) {
  EXPECT_THROW(ops::cpu::set_cpu_threads(0), InvalidArgument);
  EXPECT_THROW(ops::cpu::set_cpu_threads(ops::cpu::kMaxCpuThreads + 1), InvalidArgument);
  EXPECT_THROW(ops::cpu::set_cpu_part_timeout(std::chrono::milliseconds(0)), InvalidArgument);
}

}  // namespace
}  // namespace meshtrain
