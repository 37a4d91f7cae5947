// DeviceBlockCache on the CPU: a fake device that logs every raw call stands in for CUDA, so each
// test states exactly which mallocs, frees and synchronisations the cache asked for.
#include "meshtrain/core/device_block_cache.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "meshtrain/core/error.h"

namespace meshtrain {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

// A device of `capacity` bytes: distinct fake addresses (never dereferenced) and a log of calls.
struct FakeDevice {
  explicit FakeDevice(size_t bytes) : capacity(bytes) {}

  std::vector<std::string> calls() {
    std::lock_guard lock(mutex);
    return log;
  }

  const size_t capacity;
  std::mutex mutex;
  size_t used = 0;
  std::unordered_map<void*, size_t> blocks;
  std::vector<std::string> log;
  uintptr_t next_address = 0x10000;
};

class FakeRawMemory final : public RawDeviceMemory {
 public:
  explicit FakeRawMemory(FakeDevice& device) : device_(device) {}

  void* allocate(size_t bytes) override {
    std::lock_guard lock(device_.mutex);
    if (device_.used + bytes > device_.capacity) {
      device_.log.push_back("malloc " + std::to_string(bytes) + " -> out of memory");
      return nullptr;
    }
    void* ptr = reinterpret_cast<void*>(device_.next_address);
    device_.next_address += bytes;
    device_.used += bytes;
    device_.blocks.emplace(ptr, bytes);
    device_.log.push_back("malloc " + std::to_string(bytes));
    return ptr;
  }
  void free(void* ptr) noexcept override {
    std::lock_guard lock(device_.mutex);
    const auto it = device_.blocks.find(ptr);
    if (it == device_.blocks.end()) {
      device_.log.push_back("free of an unknown pointer");
      return;
    }
    device_.used -= it->second;
    device_.log.push_back("free " + std::to_string(it->second));
    device_.blocks.erase(it);
  }
  void synchronize_calling_stream() override { record("sync stream"); }
  void synchronize_device() override { record("sync device"); }

 private:
  void record(std::string call) {
    std::lock_guard lock(device_.mutex);
    device_.log.push_back(std::move(call));
  }

  FakeDevice& device_;
};

class DeviceBlockCacheTest : public ::testing::Test {
 protected:
  explicit DeviceBlockCacheTest(size_t capacity = size_t{1} << 40) : device_(capacity) {}

  FakeDevice device_;
  DeviceBlockCache cache_{Device::cuda(0), std::make_unique<FakeRawMemory>(device_)};
};

class SmallDeviceBlockCacheTest : public DeviceBlockCacheTest {
 protected:
  SmallDeviceBlockCacheTest() : DeviceBlockCacheTest(4096) {}
};

TEST(DeviceBlockSize, RoundsSmallRequestsToMultiplesOf512Bytes) {
  EXPECT_EQ(device_block_size(1), 512u);
  EXPECT_EQ(device_block_size(512), 512u);
  EXPECT_EQ(device_block_size(513), 1024u);
  EXPECT_EQ(device_block_size(1000), 1024u);
  EXPECT_EQ(device_block_size(kMiB - 1), kMiB);
}

TEST(DeviceBlockSize, RoundsLargeRequestsToFourSizesPerPowerOfTwo) {
  EXPECT_EQ(device_block_size(kMiB), kMiB);
  EXPECT_EQ(device_block_size(kMiB + 1), kMiB + kMiB / 4);
  EXPECT_EQ(device_block_size(kMiB + kMiB / 4 + 1), kMiB + kMiB / 2);
  EXPECT_EQ(device_block_size(2 * kMiB - 1), 2 * kMiB);
  EXPECT_EQ(device_block_size(3 * kMiB), 3 * kMiB);
  EXPECT_EQ(device_block_size(5 * kMiB + 1), 6 * kMiB);
  for (int k = 20; k < 40; ++k) {  // (2^k, 2^(k+1)] holds exactly 4 classes
    const size_t p = size_t{1} << k;
    std::set<size_t> classes;
    for (size_t j = 0; j < 16; ++j) classes.insert(device_block_size(p + 1 + j * (p / 16)));
    EXPECT_EQ(classes, (std::set<size_t>{p + p / 4, p + p / 2, p + 3 * p / 4, 2 * p})) << "k=" << k;
  }
}

TEST(DeviceBlockSize, WastesLessThan512BytesBelow1MiBAndLessThanAQuarterAbove) {
  std::mt19937_64 random(12);
  for (int i = 0; i < 100000; ++i) {
    const size_t bytes = 1 + random() % (size_t{1} << (1 + i % 40));
    const size_t size = device_block_size(bytes);
    ASSERT_GE(size, bytes);
    if (bytes < kMiB)
      ASSERT_LT(size - bytes, 512u) << bytes;
    else
      ASSERT_LT(4 * (size - bytes), bytes) << bytes;
  }
}

TEST(DeviceBlockSize, RejectsRequestsLargerThanAnyDevice) {
  EXPECT_EQ(device_block_size(kLargestDeviceBlock), kLargestDeviceBlock);
  EXPECT_THROW(device_block_size(kLargestDeviceBlock + 1), InvalidArgument);
}

TEST_F(DeviceBlockCacheTest, OwnerReusesItsFreedBlockForTheSameSizeClass) {
  const auto pool = cache_.open_pool();
  void* first = cache_.allocate(pool, 1000);
  cache_.free(first);
  EXPECT_EQ(cache_.allocate(pool, 1000), first);
  cache_.free(first);
  EXPECT_EQ(cache_.allocate(pool, 700), first);  // 700 and 1000 both take a 1024-byte block
  EXPECT_EQ(device_.calls(), (std::vector<std::string>{"malloc 1024"}));
  const DeviceCacheStats stats = cache_.stats();
  EXPECT_EQ(stats.malloc_calls, 1u);
  EXPECT_EQ(stats.free_calls, 0u);
  EXPECT_EQ(stats.in_use_bytes, 1024u);
  EXPECT_EQ(stats.cached_bytes, 0u);
  EXPECT_EQ(stats.reserved_bytes, 1024u);
}

TEST_F(DeviceBlockCacheTest, AnotherSizeClassGetsANewBlock) {
  const auto pool = cache_.open_pool();
  void* small = cache_.allocate(pool, 1000);
  cache_.free(small);
  void* larger = cache_.allocate(pool, 1100);
  EXPECT_NE(larger, small);
  EXPECT_EQ(device_.calls(), (std::vector<std::string>{"malloc 1024", "malloc 1536"}));
  EXPECT_EQ(cache_.stats().cached_bytes, 1024u);
}

TEST_F(DeviceBlockCacheTest, AnotherPoolDoesNotReuseTheBlock) {
  const auto owner = cache_.open_pool();
  const auto other = cache_.open_pool();
  void* block = cache_.allocate(owner, 1000);
  cache_.free(block);
  void* others = cache_.allocate(other, 1000);
  EXPECT_NE(others, block);
  const DeviceCacheStats stats = cache_.stats();
  EXPECT_EQ(stats.malloc_calls, 2u);
  EXPECT_EQ(stats.cached_bytes, 1024u);  // still in the owner's pool
  EXPECT_EQ(stats.in_use_bytes, 1024u);
  EXPECT_EQ(stats.reserved_bytes, 2048u);
  EXPECT_EQ(cache_.allocate(owner, 1000), block);
}

TEST_F(DeviceBlockCacheTest, CountsReservedCachedAndPeakBytesAndReleasesTheCache) {
  const auto pool = cache_.open_pool();
  void* a = cache_.allocate(pool, kMiB);
  void* b = cache_.allocate(pool, kMiB);
  void* c = cache_.allocate(pool, 3 * kMiB);
  cache_.free(a);
  cache_.free(c);
  DeviceCacheStats stats = cache_.stats();
  EXPECT_EQ(stats.reserved_bytes, 5 * kMiB);
  EXPECT_EQ(stats.peak_reserved_bytes, 5 * kMiB);
  EXPECT_EQ(stats.in_use_bytes, kMiB);
  EXPECT_EQ(stats.cached_bytes, 4 * kMiB);
  EXPECT_EQ(stats.malloc_calls, 3u);
  EXPECT_EQ(stats.free_calls, 0u);

  cache_.release_cached();
  stats = cache_.stats();
  EXPECT_EQ(stats.reserved_bytes, kMiB);
  EXPECT_EQ(stats.peak_reserved_bytes, 5 * kMiB);
  EXPECT_EQ(stats.in_use_bytes, kMiB);
  EXPECT_EQ(stats.cached_bytes, 0u);
  EXPECT_EQ(stats.free_calls, 2u);
  EXPECT_EQ(device_.used, kMiB);
  const std::vector<std::string> calls = device_.calls();
  ASSERT_EQ(calls.size(), 6u);
  EXPECT_EQ(calls[3], "sync device");  // before any block goes back
  EXPECT_EQ(std::multiset<std::string>(calls.begin() + 4, calls.end()),
            (std::multiset<std::string>{"free 1048576", "free 3145728"}));

  cache_.free(b);
  EXPECT_EQ(cache_.allocate(pool, kMiB), b);  // a block still in use was not released
}

TEST_F(SmallDeviceBlockCacheTest, OutOfMemoryReleasesEveryPoolsCacheAndRetriesOnce) {
  const auto owner = cache_.open_pool();
  const auto other = cache_.open_pool();
  void* a = cache_.allocate(owner, 2048);
  void* b = cache_.allocate(owner, 2048);
  cache_.free(a);
  cache_.free(b);
  void* c = cache_.allocate(other, 3000);
  EXPECT_NE(c, nullptr);
  EXPECT_EQ(device_.calls(),
            (std::vector<std::string>{"malloc 2048", "malloc 2048", "malloc 3072 -> out of memory",
                                      "sync device", "free 2048", "free 2048", "malloc 3072"}));
  const DeviceCacheStats stats = cache_.stats();
  EXPECT_EQ(stats.malloc_calls, 3u);
  EXPECT_EQ(stats.free_calls, 2u);
  EXPECT_EQ(stats.oom_retries, 1u);
  EXPECT_EQ(stats.reserved_bytes, 3072u);
  EXPECT_EQ(stats.peak_reserved_bytes, 4096u);
  EXPECT_EQ(stats.cached_bytes, 0u);
  EXPECT_EQ(stats.in_use_bytes, 3072u);
}

TEST_F(SmallDeviceBlockCacheTest, OutOfMemoryAfterTheRetryThrowsWithTheFigures) {
  const auto pool = cache_.open_pool();
  void* held = cache_.allocate(pool, 2048);
  cache_.free(cache_.allocate(pool, 1024));
  try {
    cache_.allocate(pool, 3000);
    FAIL() << "expected an out-of-memory error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "CUDA out of memory on cuda:0 allocating 3000 bytes (a block of 3072): 2048 bytes in "
              "use by tensors, 1024 bytes cached (returned to the device before one retry), 3072 "
              "bytes reserved at the peak");
  }
  EXPECT_EQ(device_.calls(),
            (std::vector<std::string>{"malloc 2048", "malloc 1024", "malloc 3072 -> out of memory",
                                      "sync device", "free 1024", "malloc 3072 -> out of memory"}));
  const DeviceCacheStats stats = cache_.stats();
  EXPECT_EQ(stats.oom_retries, 1u);
  EXPECT_EQ(stats.reserved_bytes, 2048u);
  EXPECT_EQ(stats.in_use_bytes, 2048u);
  EXPECT_EQ(stats.cached_bytes, 0u);

  cache_.free(held);  // the cache stays usable
  EXPECT_EQ(cache_.allocate(pool, 2000), held);
}

TEST_F(DeviceBlockCacheTest, FreeFromAnotherThreadGoesToTheOwnersPoolWithoutARawCall) {
  const auto owner = cache_.open_pool();
  const auto other = cache_.open_pool();
  void* block = cache_.allocate(owner, 5000);
  std::thread([&] { cache_.free(block); }).join();
  EXPECT_EQ(device_.calls(), (std::vector<std::string>{"malloc 5120"}));
  EXPECT_EQ(cache_.stats().cached_bytes, 5120u);
  EXPECT_NE(cache_.allocate(other, 5000), block);
  EXPECT_EQ(cache_.allocate(owner, 5000), block);
  EXPECT_EQ(cache_.stats().malloc_calls, 2u);
}

TEST_F(DeviceBlockCacheTest, ClosingAPoolWaitsForItsStreamAndReleasesOnlyItsFreeBlocks) {
  const auto owner = cache_.open_pool();
  const auto other = cache_.open_pool();
  void* cached = cache_.allocate(owner, 1024);
  void* held = cache_.allocate(owner, 2048);
  cache_.free(cache_.allocate(other, 512));
  cache_.free(cached);

  cache_.close_pool(owner);
  std::vector<std::string> calls = device_.calls();
  EXPECT_EQ(std::vector<std::string>(calls.begin() + 3, calls.end()),
            (std::vector<std::string>{"sync stream", "free 1024"}));
  DeviceCacheStats stats = cache_.stats();
  EXPECT_EQ(stats.free_calls, 1u);
  EXPECT_EQ(stats.cached_bytes, 512u);  // the other pool's block stays
  EXPECT_EQ(stats.in_use_bytes, 2048u);
  EXPECT_EQ(stats.reserved_bytes, 2560u);

  // A block of an exited owner goes straight back to the device.
  cache_.free(held);
  calls = device_.calls();
  EXPECT_EQ(calls.back(), "free 2048");
  stats = cache_.stats();
  EXPECT_EQ(stats.free_calls, 2u);
  EXPECT_EQ(stats.cached_bytes, 512u);
  EXPECT_EQ(stats.in_use_bytes, 0u);
  EXPECT_EQ(stats.reserved_bytes, 512u);

  EXPECT_THROW(cache_.allocate(owner, 1024), InvalidArgument);
  cache_.close_pool(owner);  // closing twice does nothing
  EXPECT_EQ(device_.calls().size(), calls.size());
}

TEST_F(DeviceBlockCacheTest, RejectsAPointerItDoesNotHoldOut) {
  const auto pool = cache_.open_pool();
  void* block = cache_.allocate(pool, 100);
  cache_.free(block);
  try {
    cache_.free(block);
    FAIL() << "expected a double free to be rejected";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("expected a block this cache handed out and that is not "
                                         "freed yet"),
              std::string::npos)
        << e.what();
  }
  int not_a_block = 0;
  EXPECT_THROW(cache_.free(&not_a_block), InvalidArgument);
  EXPECT_THROW(cache_.allocate(pool, 0), InvalidArgument);
  EXPECT_EQ(cache_.stats().cached_bytes, 512u);
}

TEST_F(DeviceBlockCacheTest, ThreadsAllocatingAndFreeingEachOthersBlocksKeepTheBooksExact) {
  constexpr int kThreads = 4, kRounds = 2000;
  std::mutex handoff_mutex;
  std::vector<void*> handoff;  // blocks one thread allocated and another will free
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      const auto pool = cache_.open_pool();
      std::mt19937 random(t);
      for (int i = 0; i < kRounds; ++i) {
        void* mine = cache_.allocate(pool, 1 + random() % 8192);
        std::lock_guard lock(handoff_mutex);
        handoff.push_back(mine);
        if (handoff.size() > 8) {
          cache_.free(handoff.front());
          handoff.erase(handoff.begin());
        }
      }
    });
  for (std::thread& thread : threads) thread.join();
  for (void* block : handoff) cache_.free(block);

  DeviceCacheStats stats = cache_.stats();
  EXPECT_EQ(stats.in_use_bytes, 0u);
  EXPECT_EQ(stats.reserved_bytes, stats.cached_bytes);
  EXPECT_EQ(stats.reserved_bytes, device_.used);
  EXPECT_EQ(stats.malloc_calls, device_.blocks.size());
  EXPECT_LT(stats.malloc_calls, size_t{kThreads} * kRounds);  // blocks were reused
  cache_.release_cached();
  stats = cache_.stats();
  EXPECT_EQ(stats.reserved_bytes, 0u);
  EXPECT_EQ(stats.free_calls, stats.malloc_calls);
  EXPECT_EQ(device_.used, 0u);
}

}  // namespace
}  // namespace meshtrain
