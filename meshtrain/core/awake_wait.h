// Timeouts that count only the time this process was running. Local-backend ranks are threads of
// one process: when the whole process is stopped (Ctrl-Z, SIGSTOP, a paused VM) no rank was late,
// so the pause must not count against anybody's wait. A waiter sleeps in short slices and charges
// each to its budget; a slice that overran by more than kPauseSlack was a pause (the thread could
// not have run that long late otherwise), and is charged its own length alone. Each waiter measures
// its own slices, so no other thread has to notice the pause first.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace meshtrain {

class AwakeBudget {
 public:
  using Clock = std::chrono::steady_clock;
  // Longest sleep between two charges: the precision of a pause's detection, and a waiter's
  // wake-ups per second.
  static constexpr std::chrono::milliseconds kSlice{200};
  // A slice late by more than this was a pause of the process, not a busy machine.
  static constexpr std::chrono::milliseconds kPauseSlack{1000};

  explicit AwakeBudget(std::chrono::nanoseconds timeout) : left_(timeout), last_(Clock::now()) {}

  bool spent() const { return left_ <= Clock::duration::zero(); }
  // How long the next sleep may last: a slice, or what is left if less.
  Clock::duration slice() const { return std::min<Clock::duration>(kSlice, left_); }
  // Charges the time since the previous charge (or the start), a pause excepted.
  void charge() {
    const Clock::time_point now = Clock::now();
    const Clock::duration elapsed = now - last_;
    last_ = now;
    left_ -= elapsed > kSlice + kPauseSlack ? Clock::duration(kSlice) : elapsed;
  }

 private:
  Clock::duration left_;
  Clock::time_point last_;
};

// cv.wait_for(lock, timeout, ready) with the timeout counted by AwakeBudget: true once ready(),
// false when the budget is spent first.
template <typename Ready>
bool wait_awake(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                std::chrono::nanoseconds timeout, Ready&& ready) {
  AwakeBudget budget(timeout);
  while (!ready()) {
    if (budget.spent()) return false;
    cv.wait_for(lock, budget.slice());
    budget.charge();
  }
  return true;
}

}  // namespace meshtrain
