// The CUDA caching allocator behind device_alloc/device_free, on a real GPU. Every case skips
// without one; the cache's logic is tested on the CPU in device_block_cache_test.cpp.
#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "meshtrain/core/device_memory.h"
#include "meshtrain/core/error.h"
#include "meshtrain/config.h"

#if MESHTRAIN_HAS_CUDA
#include <cuda_runtime.h>
#endif

namespace meshtrain {
namespace {

constexpr size_t kBytes = size_t{3} << 20;

TEST(DeviceCacheApi, RejectsTheHostAndDevicesThatAreNotVisible) {
  EXPECT_THROW(device_cache_stats(Device::cpu()), InvalidArgument);
  EXPECT_NO_THROW(release_cached_device_memory(Device::cpu()));
  // InvalidArgument where CUDA was built in, NotSupported where it was not.
  EXPECT_THROW(device_cache_stats(Device::cuda(cuda_device_count())), Error);
}

TEST(CudaBlockCache, ReallocatingTheSameSizeReusesTheBlockWithoutCudaCalls) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const Device gpu = Device::cuda(0);
  const DeviceCacheStats before = device_cache_stats(gpu);
  // A fresh thread has a fresh pool, whatever other tests left cached.
  std::thread([&] {
    void* first = device_alloc(gpu, kBytes);
    device_memset_zero(gpu, first, kBytes);
    device_free(gpu, first, kBytes);
    void* second = device_alloc(gpu, kBytes);
    EXPECT_EQ(second, first);
    const DeviceCacheStats during = device_cache_stats(gpu);
    EXPECT_EQ(during.malloc_calls - before.malloc_calls, 1u);
    EXPECT_EQ(during.free_calls - before.free_calls, 0u);
    device_free(gpu, second, kBytes);
    device_synchronize(gpu);
  }).join();
  // The thread's exit returned its cached block to CUDA.
  const DeviceCacheStats after = device_cache_stats(gpu);
  EXPECT_EQ(after.free_calls - before.free_calls, 1u);
  EXPECT_EQ(after.reserved_bytes, before.reserved_bytes);
  EXPECT_EQ(after.cached_bytes, before.cached_bytes);
}

TEST(CudaBlockCache, BlockFreedByAnotherThreadReturnsToItsOwner) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const Device gpu = Device::cuda(0);
  std::thread([&] {
    void* block = device_alloc(gpu, kBytes);
    device_synchronize(gpu);
    std::thread([&] { device_free(gpu, block, kBytes); }).join();
    const size_t mallocs = device_cache_stats(gpu).malloc_calls;
    EXPECT_EQ(device_alloc(gpu, kBytes), block);
    EXPECT_EQ(device_cache_stats(gpu).malloc_calls, mallocs);
    device_free(gpu, block, kBytes);
  }).join();
}

TEST(CudaBlockCache, OutOfMemoryThrowsWithTheFiguresAndLeavesNoCudaError) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const Device gpu = Device::cuda(0);
  const size_t retries = device_cache_stats(gpu).oom_retries;
  try {
    device_alloc(gpu, size_t{1} << 45);  // 32 TiB
    FAIL() << "expected an out-of-memory error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("CUDA out of memory on cuda:0 allocating 35184372088832 "
                                          "bytes",
                                          0),
              0u)
        << e.what();
  }
  EXPECT_EQ(device_cache_stats(gpu).oom_retries, retries + 1);
#if MESHTRAIN_HAS_CUDA
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
#endif
  void* block = device_alloc(gpu, kBytes);  // the device is still usable
  device_memset_zero(gpu, block, kBytes);
  device_synchronize(gpu);
  device_free(gpu, block, kBytes);
}

TEST(CudaBlockCache, ReleaseReturnsEveryCachedBlock) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const Device gpu = Device::cuda(0);
  device_free(gpu, device_alloc(gpu, kBytes), kBytes);
  EXPECT_GE(device_cache_stats(gpu).cached_bytes, kBytes);
  release_cached_device_memory(gpu);
  const DeviceCacheStats stats = device_cache_stats(gpu);
  EXPECT_EQ(stats.cached_bytes, 0u);
  EXPECT_EQ(stats.reserved_bytes, stats.in_use_bytes);
}

}  // namespace
}  // namespace meshtrain
