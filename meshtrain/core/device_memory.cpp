#include "meshtrain/core/device_memory.h"

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "meshtrain/core/device_block_cache.h"
#include "meshtrain/core/error.h"
#include "meshtrain/config.h"

#if MESHTRAIN_HAS_CUDA
#include <cuda_runtime.h>
#endif

namespace meshtrain {

namespace {
constexpr size_t kHostAlignment = 64;  // one cache line, enough for AVX-512 loads

// Training allocates and frees the same large buffers every step (FSDP's all-gather outputs and
// reduce-scatter staging, full parameters and gradients, activations). From the system allocator
// each would be mapped, faulted in page by page and unmapped again, which costs more than the
// copies themselves; like a caching allocator, freed blocks are kept by exact size and handed out
// again. Two instances: pageable blocks of at least kPageableCacheMinBytes, and pinned blocks of
// every size. Each is bounded (2 GiB, or 1/32 of the machine's memory when that is less: it is
// resident memory no rank's tracker sees); tensors' accounting is unaffected (trackers count what
// tensors hold, not what the cache keeps).
constexpr size_t kPageableCacheMinBytes = size_t{1} << 20;

class HostBlockCache {
 public:
  void* take(size_t bytes) {
    std::lock_guard lock(mutex_);
    auto it = free_.find(bytes);
    if (it == free_.end() || it->second.empty()) return nullptr;
    void* ptr = it->second.back();
    it->second.pop_back();
    cached_ -= bytes;
    return ptr;
  }
  bool give(void* ptr, size_t bytes) {
    std::lock_guard lock(mutex_);
    if (cached_ + bytes > max_cached_) return false;
    free_[bytes].push_back(ptr);
    cached_ += bytes;
    return true;
  }

 private:
  static size_t bound() {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    const size_t cap = size_t{2} << 30;
    return pages > 0 && page > 0 ? std::min(cap, static_cast<size_t>(pages) * page / 32) : cap;
  }

  std::mutex mutex_;
  std::unordered_map<size_t, std::vector<void*>> free_;
  size_t cached_ = 0;
  const size_t max_cached_ = bound();
};

HostBlockCache& host_cache() {
  static auto* cache = new HostBlockCache;  // never destroyed: frees may come late
  return *cache;
}

// glibc's thresholds, set once before the first host block. Blocks the cache keeps are mapped on
// their own: glibc's dynamic threshold would move blocks of up to 32 MiB into per-thread arenas,
// which many rank threads fragment (measured: 3.6 GB more resident memory for gpt2-large on 8
// local ranks). The smaller blocks live in the arenas, and an arena keeps up to 16 MiB of free
// space at its top instead of returning it to the system at 128 KiB: FSDP frees and allocates a
// unit's gathered parameters every layer, and each return was faulted in again page by page
// (measured: the demo's FSDP full on 4 ranks ran 3.47 s for 30 steps, 1.68 s so, with 186k page
// faults down to 40k; FSDP none 1.47 s either way).
void tune_system_allocator() {
#if defined(M_MMAP_THRESHOLD) && defined(M_TRIM_THRESHOLD)
  static const bool tuned = [] {
    mallopt(M_MMAP_THRESHOLD, static_cast<int>(kPageableCacheMinBytes));
    mallopt(M_TRIM_THRESHOLD, 16 << 20);
    return true;
  }();
  (void)tuned;
#endif
}

// Pinned blocks of every size: each cudaHostAlloc costs far more than a malloc, and each
// cudaFreeHost synchronises the device.
HostBlockCache& pinned_cache() {
  static auto* cache = new HostBlockCache;  // never destroyed: frees may come late
  return *cache;
}

size_t host_block_bytes(size_t bytes) {
  return (bytes + kHostAlignment - 1) / kHostAlignment * kHostAlignment;
}

#if MESHTRAIN_HAS_CUDA
void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    throw Error(detail::concat(what, " failed: ", cudaGetErrorString(status)));
}
void set_device(Device device) { check_cuda(cudaSetDevice(device.index), "cudaSetDevice"); }

// Makes a device current for a scope: the cache's raw operations run on whichever thread needs
// them, and that thread keeps its own current device.
class CurrentDeviceGuard {
 public:
  explicit CurrentDeviceGuard(int index) {
    check_cuda(cudaGetDevice(&previous_), "cudaGetDevice");
    if (previous_ != index) check_cuda(cudaSetDevice(index), "cudaSetDevice");
  }
  ~CurrentDeviceGuard() { cudaSetDevice(previous_); }  // errors ignored: never throws
  CurrentDeviceGuard(const CurrentDeviceGuard&) = delete;
  CurrentDeviceGuard& operator=(const CurrentDeviceGuard&) = delete;

 private:
  int previous_ = 0;
};

class CudaRawMemory final : public RawDeviceMemory {
 public:
  explicit CudaRawMemory(int index) : index_(index) {}

  void* allocate(size_t bytes) override {
    CurrentDeviceGuard on_device(index_);
    void* ptr = nullptr;
    const cudaError_t status = cudaMalloc(&ptr, bytes);
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // clears it: a later launch check would report it as its own
      return nullptr;
    }
    check_cuda(status, "cudaMalloc");
    return ptr;
  }
  // On the block's own device, so that cudaFree's implicit synchronisation is that device's and
  // no context is made on another. Errors are ignored (the runtime may already be torn down at
  // process exit).
  void free(void* ptr) noexcept override {
    int previous = 0;
    const bool switched = cudaGetDevice(&previous) == cudaSuccess && previous != index_ &&
                          cudaSetDevice(index_) == cudaSuccess;
    cudaFree(ptr);
    if (switched) cudaSetDevice(previous);
  }
  void synchronize_calling_stream() override {
    CurrentDeviceGuard on_device(index_);
    device_synchronize(Device::cuda(index_));  // bounded
  }
  void synchronize_device() override {
    CurrentDeviceGuard on_device(index_);
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }

 private:
  const int index_;
};

// One cache per visible device, made at first use and never destroyed: tensors may be freed
// during static destruction, after any destructor of this file would have run.
DeviceBlockCache& cuda_block_cache(Device device) {
  static const auto* caches = [] {
    auto* made = new std::vector<DeviceBlockCache*>;
    for (int i = 0; i < cuda_device_count(); ++i)
      made->push_back(new DeviceBlockCache(Device::cuda(i), std::make_unique<CudaRawMemory>(i)));
    return made;
  }();
  MT_CHECK(device.is_cuda() && device.index >= 0 &&
               static_cast<size_t>(device.index) < caches->size(),
           "expected a visible CUDA device, got ", to_string(device), " (", caches->size(),
           " CUDA devices visible)");
  return *(*caches)[device.index];
}

// The calling thread's pool in each device cache it has allocated from. When the thread exits
// its pools close: their free blocks go back to CUDA, and blocks still held go back when freed.
class ThreadPools {
 public:
  ThreadPools() = default;
  ~ThreadPools() {
    for (auto& [cache, pool] : pools_) cache->close_pool(pool);
  }
  ThreadPools(const ThreadPools&) = delete;
  ThreadPools& operator=(const ThreadPools&) = delete;

  DeviceBlockCache::PoolId pool_in(DeviceBlockCache& cache) {
    for (auto& [known, pool] : pools_)
      if (known == &cache) return pool;
    pools_.emplace_back(&cache, cache.open_pool());
    return pools_.back().second;
  }

 private:
  std::vector<std::pair<DeviceBlockCache*, DeviceBlockCache::PoolId>> pools_;
};

ThreadPools& this_thread_pools() {
  thread_local ThreadPools pools;
  return pools;
}
#else
[[noreturn]] void no_cuda(const char* what) {
  throw NotSupported(detail::concat(what, ": this build of meshtrain has no CUDA support"));
}
#endif
}  // namespace

void* device_alloc(Device device, size_t bytes) {
  if (bytes == 0 || device.is_meta()) return nullptr;  // shape-only: counted, never backed
  if (device.is_cpu()) {
    tune_system_allocator();
    const size_t block = host_block_bytes(bytes);
    if (block >= kPageableCacheMinBytes)
      if (void* cached = host_cache().take(block)) return cached;
    void* ptr = std::aligned_alloc(kHostAlignment, block);
    if (!ptr) throw Error(detail::concat("out of host memory allocating ", bytes, " bytes"));
    return ptr;
  }
#if MESHTRAIN_HAS_CUDA
  set_device(device);  // as callers expect: they launch on the device they allocated on
  DeviceBlockCache& cache = cuda_block_cache(device);
  return cache.allocate(this_thread_pools().pool_in(cache), bytes);
#else
  no_cuda("device_alloc");
#endif
}

void device_free(Device device, void* ptr, size_t bytes) {
  if (!ptr) return;
  if (device.is_cpu()) {
    const size_t block = host_block_bytes(bytes);
    if (block >= kPageableCacheMinBytes && host_cache().give(ptr, block)) return;
    std::free(ptr);
    return;
  }
#if MESHTRAIN_HAS_CUDA
  cuda_block_cache(device).free(ptr);  // throws only for a pointer it never handed out
#endif
}

void* pinned_host_alloc(size_t bytes) {
  if (bytes == 0) return nullptr;
  const size_t block = host_block_bytes(bytes);
  if (void* cached = pinned_cache().take(block)) return cached;
#if MESHTRAIN_HAS_CUDA
  if (cuda_device_count() == 0)
    throw NotSupported(
        "pinned host memory needs a visible CUDA device, and this process sees none");
  void* ptr = nullptr;
  const cudaError_t status = cudaHostAlloc(&ptr, block, cudaHostAllocPortable);
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // clears it: a later launch check would report it as its own
    throw Error(detail::concat("out of pinned host memory allocating ", bytes, " bytes"));
  }
  check_cuda(status, "cudaHostAlloc");
  return ptr;
#else
  no_cuda("pinned host memory");
#endif
}

void pinned_host_free(void* ptr, size_t bytes) {
  if (!ptr) return;
  if (pinned_cache().give(ptr, host_block_bytes(bytes))) return;
#if MESHTRAIN_HAS_CUDA
  // Errors ignored (the runtime may already be torn down at process exit) and cleared, so that no
  // later launch check reports one as its own.
  if (cudaFreeHost(ptr) != cudaSuccess) cudaGetLastError();
#endif
}

void device_memset_zero(Device device, void* ptr, size_t bytes) {
  if (bytes == 0 || device.is_meta()) return;
  if (device.is_cpu()) {
    std::memset(ptr, 0, bytes);
    return;
  }
#if MESHTRAIN_HAS_CUDA
  set_device(device);
  check_cuda(cudaMemsetAsync(ptr, 0, bytes, cudaStreamPerThread), "cudaMemsetAsync");
#else
  no_cuda("device_memset_zero");
#endif
}

void device_memcpy(void* dst, Device dst_device, const void* src, Device src_device,
                   size_t bytes) {
  if (bytes == 0 || dst_device.is_meta()) return;
  MT_CHECK(!src_device.is_meta(), "a copy out of shape-only memory: it holds no data");
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    std::memcpy(dst, src, bytes);
    return;
  }
#if MESHTRAIN_HAS_CUDA
  const Device gpu = dst_device.is_cuda() ? dst_device : src_device;
  const bool host_side = dst_device.is_cpu() || src_device.is_cpu();
  set_device(gpu);
  // With pageable host memory cudaMemcpyAsync itself waits for the work queued before it, with no
  // deadline: that wait comes first, bounded.
  if (host_side) device_synchronize(gpu);
  check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, cudaStreamPerThread),
             "cudaMemcpyAsync");
  // The host reads what came back, or may free or overwrite what went out, once this returns.
  if (host_side) device_synchronize(gpu);
#else
  no_cuda("device_memcpy");
#endif
}

int cuda_device_count() {
#if MESHTRAIN_HAS_CUDA
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) return 0;
  return count;
#else
  return 0;
#endif
}

std::string cuda_device_name([[maybe_unused]] int index) {
#if MESHTRAIN_HAS_CUDA
  cudaDeviceProp properties{};
  if (cudaGetDeviceProperties(&properties, index) != cudaSuccess) return "";
  return properties.name;
#else
  return "";
#endif
}

void device_synchronize(Device device, [[maybe_unused]] std::chrono::milliseconds timeout) {
  if (!device.is_cuda()) return;
#if MESHTRAIN_HAS_CUDA
  set_device(device);
  // Polls an event rather than blocking in cudaStreamSynchronize, which has no deadline.
  cudaEvent_t done = nullptr;
  check_cuda(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreate");
  const std::unique_ptr<CUevent_st, cudaError_t (*)(cudaEvent_t)> owned(done, cudaEventDestroy);
  check_cuda(cudaEventRecord(done, cudaStreamPerThread), "cudaEventRecord");
  const auto start = std::chrono::steady_clock::now();
  auto pause = std::chrono::microseconds(0);
  for (;;) {
    const cudaError_t status = cudaEventQuery(done);
    if (status == cudaSuccess) return;
    if (status != cudaErrorNotReady) check_cuda(status, "waiting for the stream (cudaEventQuery)");
    if (std::chrono::steady_clock::now() - start > timeout)
      throw Timeout(detail::concat("the work queued on ", to_string(device),
                                   " did not finish within ", timeout.count(),
                                   " ms: the GPU is hung or far slower than expected"));
    // Spin briefly (collectives wait on short copies), then back off to at most 1 ms.
    if (pause.count() > 0) std::this_thread::sleep_for(pause);
    pause = std::min(std::chrono::microseconds(1000), pause + std::chrono::microseconds(10));
  }
#else
  no_cuda("device_synchronize");
#endif
}

DeviceCacheStats device_cache_stats(Device device) {
  MT_CHECK(device.is_cuda(), "device_cache_stats: expected a CUDA device, got ", to_string(device),
           " (host memory has no device cache)");
#if MESHTRAIN_HAS_CUDA
  return cuda_block_cache(device).stats();
#else
  no_cuda("device_cache_stats");
#endif
}

void release_cached_device_memory(Device device) {
  if (!device.is_cuda()) return;
#if MESHTRAIN_HAS_CUDA
  cuda_block_cache(device).release_cached();
#else
  no_cuda("release_cached_device_memory");
#endif
}

}  // namespace meshtrain
