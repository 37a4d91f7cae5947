// Tracing: a per-rank Recorder of timed spans on named tracks, for Chrome traces (Perfetto,
// chrome://tracing) and the end-of-run profile table (meshtrain/train/trace_output.h, docs/tracing.md).
//
// A rank binds its Recorder to its compute thread (trace::Bind, as MemoryScope binds a tracker);
// instrumented code asks trace::current() and records nothing when it is null, so tracing off
// costs one thread-local load and a branch. What records:
//   - the kernel dispatch (meshtrain/core/ops/ops.cpp): one `kernel` span per kernel call, named by its op;
//   - the engine (meshtrain/parallel/engine.cpp): one `layer` span per layer forward or backward;
//   - the trainer: one `step` span per optimizer step;
//   - Communicator (meshtrain/core/comm/communicator.cpp): each op from issue to completion, a `comm` span on
//     the communicator's track, recorded by whichever thread completes it (a progress thread);
//   - Work::wait (meshtrain/core/comm/work.cpp): the time the compute thread is blocked on an unfinished op,
//     a `wait` span on the compute track: the exposed communication.
// A recorder owned by a shared_ptr stays alive until the ops traced into it complete; one that is
// not must outlive them. Every method of Recorder is thread-safe. Times are nanoseconds of the
// monotonic clock (steady_clock), so the ranks of one host share a time line.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace meshtrain::trace {

// Nanoseconds on the monotonic clock.
int64_t now_ns();

enum class Kind : uint8_t { step, layer, kernel, wait, comm, other };
inline constexpr int kNumKinds = 6;
std::string_view kind_name(Kind kind);

struct Span {
  std::string name;
  Kind kind = Kind::other;
  int track = 0;
  int64_t begin_ns = 0;
  int64_t end_ns = 0;
  // Shown as the event's arguments: (key, value) text pairs.
  std::vector<std::pair<std::string, std::string>> args;
};

// Calls and time of one name of one kind.
struct Totals {
  int64_t calls = 0;
  int64_t ns = 0;
};

struct RecorderOptions {
  // Keep every span for a trace file; without it only the totals (for --profile) are kept.
  bool keep_spans = true;
  // Spans kept at most (the rest are counted as dropped; totals still count them): about 100 bytes
  // each, so the default bounds a rank's trace at a few hundred MB.
  size_t max_spans = 4'000'000;
};

class Recorder : public std::enable_shared_from_this<Recorder> {
 public:
  static constexpr int kComputeTrack = 0;  // the thread the recorder is bound to

  explicit Recorder(int rank, RecorderOptions options = {});
  int rank() const { return rank_; }
  const RecorderOptions& options() const { return options_; }

  // A span on the compute track (or any track).
  void record(Span span);
  // One collective or transfer of communicator `group`, from issue to completion. It goes on the
  // track "comm <group>"; when it overlaps an op of that track that it does not nest in (ops
  // queued behind each other, several in flight under prefetch), on the first of the tracks
  // "comm <group> #2", "#3", ... where it does not, so that every track stays well nested.
  void record_comm(std::string_view group, Span span);

  // Every span kept, in the order recorded.
  std::vector<Span> spans() const;
  // Track names by track id (0: "compute").
  std::vector<std::string> track_names() const;
  size_t dropped_spans() const;

  // Totals by kind and name, of what was recorded while counting.
  std::map<std::pair<Kind, std::string>, Totals> totals() const;
  // Time at least one op of `group` was in flight (the union of its comm spans), and of any group
  // (empty group), while counting.
  int64_t comm_busy_ns(std::string_view group = {}) const;
  std::vector<std::string> comm_groups() const;
  // While off, spans are still kept for the trace but left out of the totals and busy intervals
  // (see Counting).
  void set_counting(bool counting);

 private:
  struct Lane {
    int track;
    int64_t end_ns;  // the latest end of a span on it
  };
  void add_locked(Span&& span);
  int track_locked(const std::string& name);

  const int rank_;
  const RecorderOptions options_;
  mutable std::mutex mutex_;
  std::vector<std::string> tracks_{"compute"};
  std::map<std::string, int, std::less<>> track_ids_;
  std::map<std::string, std::vector<Lane>, std::less<>> lanes_;  // by comm group
  std::vector<Span> spans_;
  size_t dropped_ = 0;
  bool counting_ = true;
  std::map<std::pair<Kind, std::string>, Totals> totals_;
  std::map<std::string, std::vector<std::pair<int64_t, int64_t>>, std::less<>> comm_intervals_;
};

namespace detail {
inline constinit thread_local Recorder* t_recorder = nullptr;
}  // namespace detail

// The recorder bound to the calling thread; null when tracing is off.
inline Recorder* current() { return detail::t_recorder; }

// Binds a recorder (or null) to the calling thread for the scope's lifetime.
class Bind {
 public:
  explicit Bind(Recorder* recorder);
  ~Bind();
  Bind(const Bind&) = delete;
  Bind& operator=(const Bind&) = delete;

 private:
  Recorder* previous_;
};

// Counts into `recorder`'s totals for the scope's lifetime (a recorder otherwise not counting;
// null: nothing): a profile that covers the training steps and nothing between them.
class Counting {
 public:
  explicit Counting(Recorder* recorder);
  ~Counting();
  Counting(const Counting&) = delete;
  Counting& operator=(const Counting&) = delete;

 private:
  Recorder* recorder_;
};

// A span on the compute track of the current recorder, from construction to destruction (also
// when an exception leaves the scope). Nothing is recorded, and the name is never built, when the
// thread has no recorder.
class Scope {
 public:
  // name: a string that outlives the scope (an op name).
  Scope(Kind kind, const char* name) : recorder_(current()) {
    if (recorder_) start(kind, name);
  }
  // make_name() -> std::string, called only when tracing.
  template <typename MakeName>
  requires std::is_invocable_r_v<std::string, MakeName> Scope(Kind kind, MakeName&& make_name)
      : recorder_(current()) {
    if (recorder_) start(kind, make_name());
  }
  ~Scope() {
    if (recorder_) finish();
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

  // Adds an argument shown with the span (no-op when not tracing).
  void arg(std::string key, std::string value) {
    if (recorder_) span_.args.emplace_back(std::move(key), std::move(value));
  }

 private:
  void start(Kind kind, std::string name);
  void finish();

  Recorder* recorder_;
  Span span_;
};

// Names the communication issued on this thread while it lives (FSDP: the unit), so that a
// traced op reads "all_gather h.3" rather than "all_gather". Costs nothing when not tracing.
class CommLabel {
 public:
  explicit CommLabel(const std::string& label);
  ~CommLabel();
  CommLabel(const CommLabel&) = delete;
  CommLabel& operator=(const CommLabel&) = delete;
  // The innermost label of the calling thread, or null.
  static const std::string* current();

 private:
  const std::string* previous_;
};

}  // namespace meshtrain::trace
