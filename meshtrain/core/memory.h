// Per-rank memory accounting. Every tensor allocation is charged to the tracker bound to the
// allocating thread (one tracker per rank, so ranks sharing a process keep separate counts) and to
// a category, so that FSDP's claims about sharded and unsharded bytes can be checked exactly.
#pragma once

#include <array>
#include <cstddef>
#include <mutex>
#include <string_view>

#include "meshtrain/core/device.h"

namespace meshtrain {

// Bytes in a GiB, for people-facing figures.
inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

enum class MemoryCategory {
  other,
  activation,
  param,             // parameters as held between steps (sharded under FSDP)
  grad,              // gradients as held between steps (sharded under FSDP)
  optimizer,         // optimizer state (fp32 master copies, AdamW moments)
  unsharded_param,   // full parameters alive around a unit's compute
  unsharded_grad,    // full gradients alive until they are reduced
  comm,              // staging buffers of collectives
};
inline constexpr size_t kNumMemoryCategories = 8;
std::string_view memory_category_name(MemoryCategory category);

struct MemoryCounters {
  size_t current = 0;
  size_t peak = 0;
  size_t largest = 0;  // the largest single allocation since the last reset (per category only)
};

// True for the categories that make up the model state (ZeRO's term): parameters, gradients and
// optimizer state, sharded or not. Activations, collective staging and other memory are not.
bool is_model_state(MemoryCategory category);

struct MemoryStats {
  MemoryCounters total;
  MemoryCounters model_state;  // the sum over is_model_state categories, with its own peak
  std::array<MemoryCounters, kNumMemoryCategories> by_category{};
  const MemoryCounters& operator[](MemoryCategory c) const {
    return by_category[static_cast<size_t>(c)];
  }
};

class MemoryTracker {
 public:
  void on_alloc(Device device, MemoryCategory category, size_t bytes);
  void on_free(Device device, MemoryCategory category, size_t bytes);
  MemoryStats stats(DeviceKind kind) const;
  void reset_peaks();  // peaks restart from the current values, largest allocations from zero

 private:
  mutable std::mutex mutex_;
  std::array<MemoryStats, 3> per_kind_{};  // indexed by DeviceKind
};

// The tracker and category charged by allocations made on this thread. A thread with no bound
// tracker allocates untracked memory (for example a test's reference computation).
MemoryTracker* current_memory_tracker();
MemoryCategory current_memory_category();

// Binds a tracker to the current thread for the scope's lifetime (restores the previous one).
class MemoryScope {
 public:
  explicit MemoryScope(MemoryTracker* tracker);
  ~MemoryScope();
  MemoryScope(const MemoryScope&) = delete;
  MemoryScope& operator=(const MemoryScope&) = delete;

 private:
  MemoryTracker* previous_;
};

// Charges this thread's allocations to a category for the scope's lifetime.
class MemoryCategoryScope {
 public:
  explicit MemoryCategoryScope(MemoryCategory category);
  ~MemoryCategoryScope();
  MemoryCategoryScope(const MemoryCategoryScope&) = delete;
  MemoryCategoryScope& operator=(const MemoryCategoryScope&) = delete;

 private:
  MemoryCategory previous_;
};

}  // namespace meshtrain
