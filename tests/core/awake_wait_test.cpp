// wait_awake (meshtrain/core/awake_wait.h): a timeout counts the time the process ran, not a pause of the
// whole process (issue 25: a local run stopped with Ctrl-Z and continued died with a false
// timeout, since all its ranks had been stopped alike).
#include "meshtrain/core/awake_wait.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

namespace meshtrain {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

TEST(AwakeWait, ReturnsOnceReadyAndTimesOutWhenNever) {
  std::mutex mutex;
  std::condition_variable cv;
  bool ready = false;
  std::thread setter([&] {
    std::this_thread::sleep_for(milliseconds(50));
    std::lock_guard lock(mutex);
    ready = true;
    cv.notify_all();
  });
  std::unique_lock lock(mutex);
  EXPECT_TRUE(wait_awake(cv, lock, std::chrono::seconds(30), [&] { return ready; }));
  lock.unlock();
  setter.join();

  lock.lock();
  const Clock::time_point begin = Clock::now();
  EXPECT_FALSE(wait_awake(cv, lock, milliseconds(450), [] { return false; }));
  const auto waited = Clock::now() - begin;
  EXPECT_GE(waited, milliseconds(450));
  EXPECT_LT(waited, milliseconds(450) + AwakeBudget::kPauseSlack);
}

// A child process waits 1 s for nothing; it is stopped for 2 s in the middle. Counting the pause,
// it would give up the moment it is continued (about 2.2 s after its start); counting only its
// own running time, it waits out the rest of its second after that.
TEST(AwakeWait, APauseOfTheProcessDoesNotCountAgainstTheTimeout) {
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::mutex mutex;
    std::condition_variable cv;
    std::unique_lock lock(mutex);
    const char started = 's';
    if (::write(pipe_fds[1], &started, 1) != 1) ::_exit(2);
    const Clock::time_point begin = Clock::now();
    const bool ready = wait_awake(cv, lock, std::chrono::seconds(1), [] { return false; });
    const int64_t waited_ms =
        std::chrono::duration_cast<milliseconds>(Clock::now() - begin).count();
    if (::write(pipe_fds[1], &waited_ms, sizeof waited_ms) != sizeof waited_ms) ::_exit(2);
    ::_exit(ready ? 1 : 0);
  }
  char started;
  ASSERT_EQ(::read(pipe_fds[0], &started, 1), 1);
  std::this_thread::sleep_for(milliseconds(200));
  ::kill(child, SIGSTOP);
  std::this_thread::sleep_for(std::chrono::seconds(2));
  ::kill(child, SIGCONT);
  int64_t waited_ms = 0;
  ASSERT_EQ(::read(pipe_fds[0], &waited_ms, sizeof waited_ms),
            static_cast<ssize_t>(sizeof waited_ms));
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the wait must time out in the end";
  // Stopped 2 s, then at least the 1 s budget less what it ran before (200 ms) and the slice
  // charged across the pause (200 ms).
  EXPECT_GE(waited_ms, 2000 + 1000 - 400 - 50);
}

}  // namespace
}  // namespace meshtrain
