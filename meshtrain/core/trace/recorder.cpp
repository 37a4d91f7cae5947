#include "meshtrain/core/trace/recorder.h"

#include <algorithm>
#include <chrono>

namespace meshtrain::trace {

namespace {
thread_local const std::string* t_comm_label = nullptr;

// Total length of the union of [begin, end) intervals.
int64_t union_length(std::vector<std::pair<int64_t, int64_t>> intervals) {
  std::sort(intervals.begin(), intervals.end());
  int64_t total = 0, end = INT64_MIN;
  for (const auto& [b, e] : intervals) {
    const int64_t from = std::max(b, end);
    if (e > from) total += e - from;
    end = std::max(end, e);
  }
  return total;
}
}  // namespace

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string_view kind_name(Kind kind) {
  switch (kind) {
    case Kind::step:
      return "step";
    case Kind::layer:
      return "layer";
    case Kind::kernel:
      return "kernel";
    case Kind::wait:
      return "wait";
    case Kind::comm:
      return "comm";
    case Kind::other:
      return "other";
  }
  return "other";
}

Recorder::Recorder(int rank, RecorderOptions options) : rank_(rank), options_(options) {
  track_ids_.emplace("compute", kComputeTrack);
}

int Recorder::track_locked(const std::string& name) {
  const auto it = track_ids_.find(name);
  if (it != track_ids_.end()) return it->second;
  const int id = static_cast<int>(tracks_.size());
  tracks_.push_back(name);
  track_ids_.emplace(name, id);
  return id;
}

void Recorder::add_locked(Span&& span) {
  if (counting_) {
    Totals& t = totals_[{span.kind, span.name}];
    t.calls += 1;
    t.ns += span.end_ns - span.begin_ns;
  }
  if (!options_.keep_spans) return;
  if (spans_.size() >= options_.max_spans) {
    ++dropped_;
    return;
  }
  spans_.push_back(std::move(span));
}

void Recorder::record(Span span) {
  std::lock_guard lock(mutex_);
  add_locked(std::move(span));
}

void Recorder::record_comm(std::string_view group, Span span) {
  std::lock_guard lock(mutex_);
  if (counting_) {
    auto intervals = comm_intervals_.find(group);
    if (intervals == comm_intervals_.end())
      intervals =
          comm_intervals_.emplace(std::string(group), std::vector<std::pair<int64_t, int64_t>>{})
              .first;
    intervals->second.emplace_back(span.begin_ns, span.end_ns);
  }
  auto lanes = lanes_.find(group);
  if (lanes == lanes_.end()) lanes = lanes_.emplace(std::string(group), std::vector<Lane>{}).first;
  // A lane takes the span when every span on it ended before this one began: never a partial
  // overlap, whatever order ops complete in.
  Lane* lane = nullptr;
  for (Lane& l : lanes->second)
    if (l.end_ns <= span.begin_ns) {
      lane = &l;
      break;
    }
  if (!lane) {
    const size_t n = lanes->second.size();
    std::string name = "comm " + std::string(group);
    if (n > 0) name += " #" + std::to_string(n + 1);
    lanes->second.push_back(Lane{track_locked(name), span.end_ns});
    lane = &lanes->second.back();
  }
  lane->end_ns = std::max(lane->end_ns, span.end_ns);
  span.track = lane->track;
  span.kind = Kind::comm;
  add_locked(std::move(span));
}

std::vector<Span> Recorder::spans() const {
  std::lock_guard lock(mutex_);
  return spans_;
}

std::vector<std::string> Recorder::track_names() const {
  std::lock_guard lock(mutex_);
  return tracks_;
}

size_t Recorder::dropped_spans() const {
  std::lock_guard lock(mutex_);
  return dropped_;
}

std::map<std::pair<Kind, std::string>, Totals> Recorder::totals() const {
  std::lock_guard lock(mutex_);
  return totals_;
}

int64_t Recorder::comm_busy_ns(std::string_view group) const {
  std::lock_guard lock(mutex_);
  if (!group.empty()) {
    const auto it = comm_intervals_.find(group);
    return it == comm_intervals_.end() ? 0 : union_length(it->second);
  }
  std::vector<std::pair<int64_t, int64_t>> all;
  for (const auto& [name, intervals] : comm_intervals_)
    all.insert(all.end(), intervals.begin(), intervals.end());
  return union_length(std::move(all));
}

std::vector<std::string> Recorder::comm_groups() const {
  std::lock_guard lock(mutex_);
  std::vector<std::string> names;
  for (const auto& [name, intervals] : comm_intervals_) names.push_back(name);
  return names;
}

void Recorder::set_counting(bool counting) {
  std::lock_guard lock(mutex_);
  counting_ = counting;
}

Counting::Counting(Recorder* recorder) : recorder_(recorder) {
  if (recorder_) recorder_->set_counting(true);
}

Counting::~Counting() {
  if (recorder_) recorder_->set_counting(false);
}

Bind::Bind(Recorder* recorder) : previous_(detail::t_recorder) { detail::t_recorder = recorder; }
Bind::~Bind() { detail::t_recorder = previous_; }

void Scope::start(Kind kind, std::string name) {
  span_.kind = kind;
  span_.name = std::move(name);
  span_.track = Recorder::kComputeTrack;
  span_.begin_ns = now_ns();
}

void Scope::finish() {
  span_.end_ns = now_ns();
  recorder_->record(std::move(span_));
}

CommLabel::CommLabel(const std::string& label) : previous_(t_comm_label) { t_comm_label = &label; }
CommLabel::~CommLabel() { t_comm_label = previous_; }
const std::string* CommLabel::current() { return t_comm_label; }

}  // namespace meshtrain::trace
