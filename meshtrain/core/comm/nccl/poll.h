// Polling with a deadline: how the nccl backend waits on NCCL and CUDA without ever blocking in
// them, so that every wait can time out.
#pragma once

#include <chrono>
#include <thread>

namespace meshtrain::nccl {

enum class Progress { pending, done, failed };

// Calls step until it stops returning pending or the deadline passes (then returns pending).
// Spins briefly first, since most ops finish within microseconds, then sleeps between checks so
// that a slow peer does not burn a core.
template <typename Step>
Progress poll_until(std::chrono::steady_clock::time_point deadline, Step&& step) {
  constexpr int kSpins = 1000;
  for (int i = 0;; ++i) {
    const Progress progress = step();
    if (progress != Progress::pending) return progress;
    if (std::chrono::steady_clock::now() >= deadline) return Progress::pending;
    if (i < kSpins)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

}  // namespace meshtrain::nccl
