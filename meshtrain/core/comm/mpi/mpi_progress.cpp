#include "meshtrain/core/comm/mpi/mpi_progress.h"

#include "meshtrain/core/comm/mpi/mpi_runtime.h"
#include "meshtrain/core/error.h"

namespace meshtrain {

namespace {
using Clock = std::chrono::steady_clock;
constexpr auto kBusyPollFor = std::chrono::seconds(1);

std::string what_of(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown error";
  }
}
}  // namespace

MpiProgress::MpiProgress(std::chrono::milliseconds timeout) : timeout_(timeout) {
  thread_ = std::thread([this] { run(); });
}

MpiProgress::~MpiProgress() {
  if (!shut_down_) shutdown(false);
}

void MpiProgress::enqueue(MpiOp op) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(op));
  }
  cv_.notify_one();
}

void MpiProgress::enqueue(std::vector<MpiOp> ops) {
  {
    std::lock_guard lock(mutex_);
    for (MpiOp& op : ops) queue_.push_back(std::move(op));
  }
  cv_.notify_one();
}

bool MpiProgress::shutdown(bool abandon) {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    abandon_ = abandon;
  }
  cv_.notify_one();
  thread_.join();
  shut_down_ = true;
  return clean_;
}

void MpiProgress::fail_group(const std::exception_ptr& error) {
  if (broken_.empty()) broken_ = what_of(error);
}

void MpiProgress::post(MpiOp& op) {
  if (!broken_.empty()) {
    op.work->fail(std::make_exception_ptr(CommError(detail::concat(
        op.work->description(), " was not started: the group is unusable after an earlier failure: ",
        broken_))));
    return;
  }
  try {
    const MPI_Request request = op.start();
    in_flight_.push_back(InFlight{std::move(op), request, Clock::now() + timeout_});
  } catch (...) {
    fail_group(std::current_exception());
    op.work->fail(std::current_exception());
  }
}

bool MpiProgress::poll() {
  bool progressed = false;
  const auto now = Clock::now();
  for (auto it = in_flight_.begin(); it != in_flight_.end();) {
    int done = 0;
    MPI_Status status;
    // Test, never wait: a late peer's request must not hold up the others in flight.
    const int rc = MPI_Test(&it->request, &done, &status);
    if (rc != MPI_SUCCESS || done) {
      if (!it->expired) {
        try {
          mpi_check(rc, it->op.work->description());
          if (it->op.finish) it->op.finish(status);
          it->op.work->complete();
        } catch (...) {
          fail_group(std::current_exception());
          it->op.work->fail(std::current_exception());
        }
      }
      it = in_flight_.erase(it);
      progressed = true;
      continue;
    }
    if (!it->expired && now > it->deadline) {
      // Worded as Work::wait's own timeout: whichever notices first, the report is the same.
      const auto error = std::make_exception_ptr(Timeout(detail::concat(
          "timed out after ", timeout_.count(), " ms waiting for ", it->op.work->description(),
          " (a rank is missing or the ranks issued ops in different orders); the group is "
          "unusable from now on")));
      fail_group(error);
      it->op.work->fail(error);
      it->expired = true;  // still posted: keep its buffers until MPI releases it
    }
    ++it;
  }
  return progressed;
}

void MpiProgress::run() {
  auto quiet_since = Clock::now();
  for (;;) {
    std::deque<MpiOp> fresh;
    bool live = false;
    for (const auto& f : in_flight_) live = live || !f.expired;
    {
      std::unique_lock lock(mutex_);
      const auto ready = [&] { return stopping_ || !queue_.empty(); };
      if (in_flight_.empty()) {
        cv_.wait(lock, ready);
      } else if (!live) {
        cv_.wait_for(lock, std::chrono::milliseconds(10), ready);  // only to release expired ops
      }
      fresh.swap(queue_);
      if (abandon_ || (stopping_ && fresh.empty() && !live)) {
        for (auto& op : fresh)
          op.work->fail(std::make_exception_ptr(CommError(detail::concat(
              op.work->description(), " was not started: its communicator was destroyed"))));
        for (auto& f : in_flight_)
          if (!f.expired)
            f.op.work->fail(std::make_exception_ptr(CommError(detail::concat(
                f.op.work->description(), " was abandoned: its communicator was destroyed"))));
        clean_ = in_flight_.empty();
        // Requests still posted may write into their buffers at any time: never free them.
        if (!clean_) new std::vector<InFlight>(std::move(in_flight_));
        return;
      }
    }
    for (auto& op : fresh) post(op);
    const bool progressed = poll() || !fresh.empty();
    // MPI moves data only inside MPI calls (a large message goes fragment by fragment), so the
    // poll rate bounds the bandwidth: poll back to back, yielding to other threads. Only when
    // nothing has completed for a long while (a peer is late) sleep between polls, so that a
    // waiting rank does not burn a core until its timeout.
    const auto now = Clock::now();
    if (progressed) {
      quiet_since = now;
    } else if (now - quiet_since > kBusyPollFor) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    } else {
      std::this_thread::yield();
    }
  }
}

}  // namespace meshtrain
