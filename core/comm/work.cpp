#include "core/comm/work.h"

#include "core/error.h"

namespace meshtrain {

void AsyncWork::wait(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (!cv_.wait_for(lock, timeout, [&] { return done_; }))
    throw Timeout(detail::concat("timed out after ", timeout.count(), " ms waiting for ",
                                 description()));
  if (error_) std::rethrow_exception(error_);
}

bool AsyncWork::is_completed() {
  std::lock_guard lock(mutex_);
  return done_;
}

void AsyncWork::complete() {
  {
    std::lock_guard lock(mutex_);
    done_ = true;
  }
  cv_.notify_all();
}

void AsyncWork::fail(std::exception_ptr error) {
  {
    std::lock_guard lock(mutex_);
    done_ = true;
    error_ = std::move(error);
  }
  cv_.notify_all();
}

}  // namespace meshtrain
