// Shape-only (meta) tensors: counted by the memory tracker at any size, never backed; writes into
// them do nothing, reads out of them are refused; kernels check their arguments and compute
// nothing.
#include <gtest/gtest.h>

#include "meshtrain/core/error.h"
#include "meshtrain/core/memory.h"
#include "meshtrain/core/ops/ops.h"
#include "meshtrain/core/tensor.h"
#include "tests/support/error_message.h"

namespace meshtrain {
namespace {

using testing::expect_error;

TEST(MetaTensor, IsCountedButNotBacked) {
  MemoryTracker tracker;
  MemoryScope bind(&tracker);
  MemoryCategoryScope activations(MemoryCategory::activation);
  {
    const Tensor huge = Tensor::empty({int64_t{1} << 20, int64_t{1} << 20}, DType::bf16,
                                      Device::meta());  // 2 TiB
    EXPECT_EQ(huge.device(), Device::meta());
    EXPECT_EQ(tracker.stats(DeviceKind::meta)[MemoryCategory::activation].current, size_t{2} << 40);
    EXPECT_EQ(tracker.stats(DeviceKind::cpu).total.current, 0u);
    const Tensor rows = huge.rows(1, 2);  // views work as on any device
    EXPECT_EQ(rows.shape(), (Shape{2, int64_t{1} << 20}));
  }
  EXPECT_EQ(tracker.stats(DeviceKind::meta).total.current, 0u);
  EXPECT_EQ(tracker.stats(DeviceKind::meta).total.peak, size_t{2} << 40);
}

TEST(MetaTensor, WritesDoNothingAndReadsAreRefused) {
  const Tensor meta = Tensor::zeros({4}, DType::f32, Device::meta());
  meta.copy_from(Tensor::from_vector(std::vector<float>{1.f, 2.f, 3.f, 4.f}, {4}));  // checked, nothing written
  EXPECT_THROW(meta.copy_from(Tensor::zeros({5})), InvalidArgument);
  expect_error<NotSupported>([&] { meta.data<float>(); }, "f32[4] on meta is shape-only");
  EXPECT_THROW(meta.to_vector(), NotSupported);
  EXPECT_THROW(Tensor::zeros({4}).copy_from(meta), NotSupported);
  EXPECT_EQ(to_string(Device::meta()), "meta");
  EXPECT_EQ(parse_device("meta"), Device::meta());
}

TEST(MetaTensor, KernelsCheckTheirArgumentsAndComputeNothing) {
  const Device meta = Device::meta();
  const Tensor a = Tensor::empty({3, 5}, DType::f32, meta);
  const Tensor b = Tensor::empty({5, 7}, DType::f32, meta);
  ops::matmul(Tensor::empty({3, 7}, DType::f32, meta), a, b, false, false, 1.f, 0.f);
  EXPECT_THROW(ops::matmul(Tensor::empty({3, 6}, DType::f32, meta), a, b, false, false, 1.f, 0.f),
               InvalidArgument);
  EXPECT_EQ(ops::sum_squares({a, b}), 0.0);
  // One device per call, meta included.
  EXPECT_THROW(ops::matmul(Tensor::empty({3, 7}), a, b, false, false, 1.f, 0.f), InvalidArgument);
}

}  // namespace
}  // namespace meshtrain
