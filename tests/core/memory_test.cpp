// MemoryTracker: per-category current, peak and largest single allocation, charged by the tensors
// a thread allocates while the tracker is bound.
#include "meshtrain/core/memory.h"

#include <gtest/gtest.h>

#include "meshtrain/core/tensor.h"

namespace meshtrain {
namespace {

TEST(MemoryTracker, CountsCurrentPeakAndLargestPerCategory) {
  MemoryTracker tracker;
  MemoryScope bind(&tracker);
  MemoryCategoryScope activations(MemoryCategory::activation);
  {
    const Tensor small = Tensor::empty({10});
    const Tensor big = Tensor::empty({100});
  }
  const Tensor kept = Tensor::empty({30});
  MemoryCounters c = tracker.stats(DeviceKind::cpu)[MemoryCategory::activation];
  EXPECT_EQ(c.current, 4u * 30);
  EXPECT_EQ(c.peak, 4u * 110);
  EXPECT_EQ(c.largest, 4u * 100);
  EXPECT_EQ(tracker.stats(DeviceKind::cpu)[MemoryCategory::param].largest, 0u);

  tracker.reset_peaks();  // peaks restart from what is held, the largest allocation from zero
  c = tracker.stats(DeviceKind::cpu)[MemoryCategory::activation];
  EXPECT_EQ(c.peak, 4u * 30);
  EXPECT_EQ(c.largest, 0u);
  const Tensor next = Tensor::empty({20});
  EXPECT_EQ(tracker.stats(DeviceKind::cpu)[MemoryCategory::activation].largest, 4u * 20);
}

}  // namespace
}  // namespace meshtrain
