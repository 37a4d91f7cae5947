#include "core/device_memory.h"

#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "meshtrain/config.h"

#if MESHTRAIN_HAS_CUDA
#include <cuda_runtime.h>
#endif

namespace meshtrain {

namespace {
constexpr size_t kHostAlignment = 64;  // one cache line, enough for AVX-512 loads

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
    void* ptr = std::aligned_alloc(kHostAlignment, (bytes + kHostAlignment - 1) / kHostAlignment *
                                                       kHostAlignment);
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

void device_free(Device device, void* ptr) {
  if (!ptr) return;
  if (device.is_cpu()) {
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
