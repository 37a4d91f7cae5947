// Work: the handle of an asynchronous communication op. wait() blocks until the op completes and
// rethrows its error; it never blocks longer than the timeout (then it throws Timeout naming the
// op, the group and the rank).
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <string>

namespace meshtrain {

class Work {
 public:
  Work(std::string description, std::chrono::milliseconds default_timeout)
      : description_(std::move(description)), default_timeout_(default_timeout) {}
  virtual ~Work() = default;

  virtual void wait(std::chrono::milliseconds timeout) = 0;
  void wait() { wait(default_timeout_); }
  virtual bool is_completed() = 0;
  // "all_gather of 4096 bytes on group 'dp_shard' (size 4) at rank 1"
  const std::string& description() const { return description_; }

 private:
  std::string description_;
  std::chrono::milliseconds default_timeout_;
};
using WorkPtr = std::shared_ptr<Work>;

// A Work completed by another thread (a progress thread) through complete() or fail().
class AsyncWork : public Work {
 public:
  using Work::Work;
  void wait(std::chrono::milliseconds timeout) override;
  bool is_completed() override;
  void complete();
  void fail(std::exception_ptr error);

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
};

// A Work that is already complete (for example an op on a group of one rank).
class CompletedWork : public Work {
 public:
  using Work::Work;
  void wait(std::chrono::milliseconds) override {}
  bool is_completed() override { return true; }
};

}  // namespace meshtrain
