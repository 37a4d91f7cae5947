#include "meshtrain/core/memory.h"

#include <algorithm>

namespace meshtrain {

namespace {
// The one piece of ambient state in meshtrain: which rank's tracker this thread charges. It is
// thread-local and set only through the RAII scopes below, like a CUDA device guard.
thread_local MemoryTracker* t_tracker = nullptr;
thread_local MemoryCategory t_category = MemoryCategory::other;
}  // namespace

std::string_view memory_category_name(MemoryCategory category) {
  switch (category) {
    case MemoryCategory::other: return "other";
    case MemoryCategory::activation: return "activation";
    case MemoryCategory::param: return "param";
    case MemoryCategory::grad: return "grad";
    case MemoryCategory::optimizer: return "optimizer";
    case MemoryCategory::unsharded_param: return "unsharded_param";
    case MemoryCategory::unsharded_grad: return "unsharded_grad";
    case MemoryCategory::comm: return "comm";
  }
  return "unknown";
}

bool is_model_state(MemoryCategory category) {
  switch (category) {
    case MemoryCategory::param:
    case MemoryCategory::grad:
    case MemoryCategory::optimizer:
    case MemoryCategory::unsharded_param:
    case MemoryCategory::unsharded_grad: return true;
    default: return false;
  }
}

void MemoryTracker::on_alloc(Device device, MemoryCategory category, size_t bytes) {
  std::lock_guard lock(mutex_);
  MemoryStats& s = per_kind_[static_cast<size_t>(device.kind)];
  MemoryCounters& c = s.by_category[static_cast<size_t>(category)];
  c.current += bytes;
  c.peak = std::max(c.peak, c.current);
  c.largest = std::max(c.largest, bytes);
  s.total.current += bytes;
  s.total.peak = std::max(s.total.peak, s.total.current);
  if (is_model_state(category)) {
    s.model_state.current += bytes;
    s.model_state.peak = std::max(s.model_state.peak, s.model_state.current);
  }
}

void MemoryTracker::on_free(Device device, MemoryCategory category, size_t bytes) {
  std::lock_guard lock(mutex_);
  MemoryStats& s = per_kind_[static_cast<size_t>(device.kind)];
  s.by_category[static_cast<size_t>(category)].current -= bytes;
  s.total.current -= bytes;
  if (is_model_state(category)) s.model_state.current -= bytes;
}

MemoryStats MemoryTracker::stats(DeviceKind kind) const {
  std::lock_guard lock(mutex_);
  return per_kind_[static_cast<size_t>(kind)];
}

void MemoryTracker::reset_peaks() {
  std::lock_guard lock(mutex_);
  for (MemoryStats& s : per_kind_) {
    s.total.peak = s.total.current;
    s.model_state.peak = s.model_state.current;
    for (MemoryCounters& c : s.by_category) {
      c.peak = c.current;
      c.largest = 0;
    }
  }
}

MemoryTracker* current_memory_tracker() { return t_tracker; }
MemoryCategory current_memory_category() { return t_category; }

MemoryScope::MemoryScope(MemoryTracker* tracker) : previous_(t_tracker) { t_tracker = tracker; }
MemoryScope::~MemoryScope() { t_tracker = previous_; }

MemoryCategoryScope::MemoryCategoryScope(MemoryCategory category) : previous_(t_category) {
  t_category = category;
}
MemoryCategoryScope::~MemoryCategoryScope() { t_category = previous_; }

}  // namespace meshtrain
