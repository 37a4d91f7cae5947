#include "meshtrain/core/comm/work.h"

#include "meshtrain/core/awake_wait.h"
#include "meshtrain/core/error.h"
#include "meshtrain/core/trace/recorder.h"

namespace meshtrain {

struct Work::TraceTag {
  std::shared_ptr<trace::Recorder> recorder;
  std::string group;
  int64_t issued_ns;
};

namespace {
thread_local double t_comm_wait_seconds = 0.0;
}  // namespace

double comm_wait_seconds() { return t_comm_wait_seconds; }

void Work::add_wait_seconds(double seconds) { t_comm_wait_seconds += seconds; }

Work::~Work() { delete trace_tag_.load(); }

void Work::trace(std::shared_ptr<trace::Recorder> recorder, std::string group, std::string name,
                 int64_t issued_ns) {
  trace_name_ = std::move(name);
  delete trace_tag_.exchange(new TraceTag{std::move(recorder), std::move(group), issued_ns});
  // Completed meanwhile: mark_completed() may have run before the tag was there.
  if (completed_.load()) record_trace(trace_tag_.exchange(nullptr));
}

void Work::mark_completed() {
  completed_ns_ = trace::now_ns();
  completed_.store(true);
  if (trace_tag_.load() != nullptr) record_trace(trace_tag_.exchange(nullptr));
}

void Work::record_trace(TraceTag* tag) {
  if (!tag) return;  // the other side took it
  const std::unique_ptr<TraceTag> owned(tag);
  trace::Span span;
  span.name = trace_name_;
  span.begin_ns = tag->issued_ns;
  span.end_ns = std::max(completed_ns_, tag->issued_ns);
  span.args.emplace_back("op", description());
  tag->recorder->record_comm(tag->group, std::move(span));
}

void AsyncWork::wait(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  // Time blocked on an op still in flight, or running it, is exposed communication: a wait span
  // on the tracing thread's compute track.
  const bool blocks = !done_;
  trace::Recorder* recorder = blocks ? trace::current() : nullptr;
  const int64_t start = recorder ? trace::now_ns() : 0;
  const auto blocked_from = std::chrono::steady_clock::now();
  if (blocks && run_on_wait_ && timeout >= default_timeout()) {
    const std::function<void()> run = std::move(run_on_wait_);
    run_on_wait_ = nullptr;
    lock.unlock();
    run();
    lock.lock();
  }
  const bool done = wait_awake(cv_, lock, timeout, [&] { return done_; });
  if (blocks)
    add_wait_seconds(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - blocked_from).count());
  if (recorder) {
    trace::Span span;
    span.name = "wait " + (trace_name().empty() ? std::string("comm") : trace_name());
    span.kind = trace::Kind::wait;
    span.begin_ns = start;
    span.end_ns = trace::now_ns();
    span.args.emplace_back("op", description());
    if (!done) span.args.emplace_back("outcome", "timed out");
    recorder->record(std::move(span));
  }
  if (!done)
    throw Timeout(detail::concat("timed out after ", timeout.count(), " ms waiting for ",
                                 description()));
  if (error_) std::rethrow_exception(error_);
}

bool AsyncWork::is_completed() {
  std::lock_guard lock(mutex_);
  return done_;
}

void AsyncWork::complete() {
  mark_completed();
  {
    std::lock_guard lock(mutex_);
    done_ = true;
  }
  cv_.notify_all();
}

void AsyncWork::fail(std::exception_ptr error) {
  mark_completed();
  {
    std::lock_guard lock(mutex_);
    done_ = true;
    error_ = std::move(error);
  }
  cv_.notify_all();
}

}  // namespace meshtrain
