// Pinned host tensors (Tensor::empty_pinned): page-locked memory that GPU copies stream from and
// into, as FSDP's offloaded shards use it. Without a GPU, asking for one is a clear error.
#include <gtest/gtest.h>

#include <vector>

#include "meshtrain/core/device_memory.h"
#include "meshtrain/core/error.h"
#include "meshtrain/core/tensor.h"
#include "tests/support/error_message.h"

namespace meshtrain {
namespace {

TEST(PinnedHostMemory, NeedsAVisibleGpu) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "a GPU is visible";
  // "...needs a visible CUDA device" where CUDA was built in, "...: no CUDA support" elsewhere.
  testing::expect_error<NotSupported>([] { Tensor::empty_pinned({16}, DType::f32); },
                                      "pinned host memory");
}

TEST(PinnedHostMemory, IsHostMemoryThatCopiesToAndFromTheGpu) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU";
  const Tensor pinned = Tensor::empty_pinned({1000}, DType::f32);
  EXPECT_TRUE(pinned.pinned());
  EXPECT_EQ(pinned.device(), Device::cpu());
  EXPECT_EQ(pinned.describe(), "f32[1000] on cpu (pinned)");
  EXPECT_FALSE(Tensor::zeros({4}).pinned());
  float* values = pinned.data<float>();
  for (int i = 0; i < 1000; ++i) values[i] = 0.5f * static_cast<float>(i);
  const Tensor back = pinned.to(Device::cuda(0)).to(Device::cpu());
  EXPECT_FALSE(back.pinned());  // a copy is ordinary memory
  EXPECT_EQ(back.to_vector(), pinned.to_vector());
}

TEST(PinnedHostMemory, AFreedBlockIsHandedOutAgain) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU";
  void* first = nullptr;
  {
    const Tensor t = Tensor::empty_pinned({12345}, DType::bf16);
    first = t.raw_data();
  }
  const Tensor again = Tensor::empty_pinned({12345}, DType::bf16);
  EXPECT_EQ(again.raw_data(), first);  // from the cache: no cudaHostAlloc, no cudaFreeHost
}

}  // namespace
}  // namespace meshtrain
