// Work: the handle of an asynchronous communication op. wait() blocks until the op completes and
// rethrows its error; it never blocks longer than the timeout (then it throws Timeout naming the
// op, the group and the rank).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

namespace meshtrain {

namespace trace {
class Recorder;
}

// Seconds the calling thread has spent blocked in Work::wait on ops still in flight: its exposed
// communication, whoever issued the ops (FSDP, TP, the pipeline, the loss). Per thread, so per
// rank on the local backend; the trainer reports each step's difference.
double comm_wait_seconds();

class Work {
 public:
  Work(std::string description, std::chrono::milliseconds default_timeout)
      : description_(std::move(description)), default_timeout_(default_timeout) {}
  virtual ~Work();
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  virtual void wait(std::chrono::milliseconds timeout) = 0;
  void wait() { wait(default_timeout_); }
  std::chrono::milliseconds default_timeout() const { return default_timeout_; }
  virtual bool is_completed() = 0;
  // "all_gather of 4096 bytes on group 'dp_shard' (size 4) at rank 1"
  const std::string& description() const { return description_; }

  // Tracing (core/trace): records the op on `recorder` as a span named `name` ("all_gather h.3")
  // from `issued_ns` to its completion on the track of communicator `group`, once it completes
  // (at once if it already has). The Communicator base calls this when the issuing thread traces;
  // backends only call mark_completed(). A backend that never does records no comm spans.
  void trace(std::shared_ptr<trace::Recorder> recorder, std::string group, std::string name,
             int64_t issued_ns);
  // The traced name ("all_gather h.3"), empty when the op is not traced.
  const std::string& trace_name() const { return trace_name_; }

 protected:
  // Backends call this once, when the op completes or fails, from any thread.
  void mark_completed();
  // Backends' wait() adds the time it blocked on an op still in flight (comm_wait_seconds).
  static void add_wait_seconds(double seconds);

 private:
  struct TraceTag;
  void record_trace(TraceTag* tag);

  std::string description_;
  std::chrono::milliseconds default_timeout_;
  std::string trace_name_;
  // Whoever takes the tag out (the tracing thread after completion, or the completing thread)
  // records the span, exactly once.
  std::atomic<TraceTag*> trace_tag_{nullptr};
  std::atomic<bool> completed_{false};
  int64_t completed_ns_ = 0;  // written before completed_ is set
};
using WorkPtr = std::shared_ptr<Work>;

// A Work completed by another thread (a progress thread) through complete() or fail().
class AsyncWork : public Work {
 public:
  using Work::wait;
  using Work::Work;
  void wait(std::chrono::milliseconds timeout) override;
  bool is_completed() override;
  void complete();
  void fail(std::exception_ptr error);

  // Lets the thread that waits do the op's work itself before it blocks (the local backend runs
  // its queue through the op: ProgressThread::runner_through). wait() calls `run` once, on an op
  // still in flight, when its timeout is no shorter than the op's own deadline (the default
  // timeout), so that running the op cannot outlast the wait. Set by the issuing thread, before
  // the Work is handed out.
  void run_on_wait(std::function<void()> run) { run_on_wait_ = std::move(run); }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
  std::function<void()> run_on_wait_;
};

// A Work that is already complete (for example an op on a group of one rank).
class CompletedWork : public Work {
 public:
  CompletedWork(std::string description, std::chrono::milliseconds default_timeout)
      : Work(std::move(description), default_timeout) {
    mark_completed();
  }
  void wait(std::chrono::milliseconds) override {}
  bool is_completed() override { return true; }
};

}  // namespace meshtrain
