#include "core/device_memory.h"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/error.h"
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
// copies themselves; like a caching allocator, freed large blocks are kept by exact size and
// handed out again. The cache is bounded; tensors' accounting is unaffected (trackers count what
// tensors hold, not what the cache keeps).
class HostBlockCache {
 public:
  static constexpr size_t kMinBytes = size_t{1} << 20;
  static constexpr size_t kMaxCachedBytes = size_t{2} << 30;

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
    if (cached_ + bytes > kMaxCachedBytes) return false;
    free_[bytes].push_back(ptr);
    cached_ += bytes;
    return true;
  }

 private:
  std::mutex mutex_;
  std::unordered_map<size_t, std::vector<void*>> free_;
  size_t cached_ = 0;
};

HostBlockCache& host_cache() {
  static HostBlockCache* cache = new HostBlockCache;  // never destroyed: frees may come late
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
#else
[[noreturn]] void no_cuda(const char* what) {
  throw NotSupported(detail::concat(what, ": this build of meshtrain has no CUDA support"));
}
#endif
}  // namespace

void* device_alloc(Device device, size_t bytes) {
  if (bytes == 0) return nullptr;
  if (device.is_cpu()) {
    const size_t block = host_block_bytes(bytes);
    if (block >= HostBlockCache::kMinBytes)
      if (void* cached = host_cache().take(block)) return cached;
    void* ptr = std::aligned_alloc(kHostAlignment, block);
    if (!ptr) throw Error(detail::concat("out of host memory allocating ", bytes, " bytes"));
    return ptr;
  }
#if MESHTRAIN_HAS_CUDA
  set_device(device);
  void* ptr = nullptr;
  check_cuda(cudaMalloc(&ptr, bytes), "cudaMalloc");
  return ptr;
#else
  no_cuda("device_alloc");
#endif
}

void device_free(Device device, void* ptr, size_t bytes) {
  if (!ptr) return;
  if (device.is_cpu()) {
    const size_t block = host_block_bytes(bytes);
    if (block >= HostBlockCache::kMinBytes && host_cache().give(ptr, block)) return;
    std::free(ptr);
    return;
  }
#if MESHTRAIN_HAS_CUDA
  cudaFree(ptr);  // never throws from a destructor path
#endif
}

void device_memset_zero(Device device, void* ptr, size_t bytes) {
  if (bytes == 0) return;
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
  if (bytes == 0) return;
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    std::memcpy(dst, src, bytes);
    return;
  }
#if MESHTRAIN_HAS_CUDA
  set_device(dst_device.is_cuda() ? dst_device : src_device);
  check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, cudaStreamPerThread),
             "cudaMemcpyAsync");
  if (dst_device.is_cpu() || src_device.is_cpu())
    check_cuda(cudaStreamSynchronize(cudaStreamPerThread), "cudaStreamSynchronize");
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

void device_synchronize(Device device) {
  if (device.is_cpu()) return;
#if MESHTRAIN_HAS_CUDA
  set_device(device);
  check_cuda(cudaStreamSynchronize(cudaStreamPerThread), "cudaStreamSynchronize");
#else
  no_cuda("device_synchronize");
#endif
}

}  // namespace meshtrain
