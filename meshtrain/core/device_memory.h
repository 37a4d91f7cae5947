// Raw allocation and copies on any device. CUDA calls compile only where the toolkit was found;
// elsewhere a CUDA device raises NotSupported.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

#include "meshtrain/core/device.h"

namespace meshtrain {

void* device_alloc(Device device, size_t bytes);
// bytes: as passed to device_alloc.
void device_free(Device device, void* ptr, size_t bytes);
// Page-locked host memory (cudaHostAlloc, portable to every GPU), as torch's pin_memory: the GPU's
// copy engines read and write it directly, so copies to and from it need no staging through a
// driver buffer and run asynchronously. Freed blocks are cached by size (cudaFreeHost synchronises
// the device) and handed to any thread at once, so a block must be freed only once no copy uses
// it any more (the collectives release theirs after completing). Needs a visible GPU: without one
// this raises NotSupported.
void* pinned_host_alloc(size_t bytes);
void pinned_host_free(void* ptr, size_t bytes);
void device_memset_zero(Device device, void* ptr, size_t bytes);
// Copies between any two devices (host<->device, device<->device, host<->host).
void device_memcpy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes);
// Number of CUDA devices visible; 0 without a GPU or without CUDA in this build.
int cuda_device_count();
// The name CUDA reports for device `index` ("NVIDIA H100 80GB HBM3"); "" when it cannot tell.
std::string cuda_device_name(int index);
// How long a device wait may take before it is taken for a hung GPU.
inline constexpr std::chrono::milliseconds kDeviceWaitTimeout = std::chrono::minutes(5);
// Blocks the host until all work on the calling thread's CUDA stream is done (no-op on CPU), for
// at most `timeout`: a GPU that stops making progress raises Timeout naming the device rather
// than hanging the rank.
void device_synchronize(Device device, std::chrono::milliseconds timeout = kDeviceWaitTimeout);

// CUDA memory comes from a caching allocator (meshtrain/core/device_block_cache.h): a freed block is kept
// in the pool of the thread that allocated it and handed out again by that thread only, so its
// reuse is ordered after the earlier work on that thread's stream (cudaStreamPerThread).
// Contract, as PyTorch's record_stream: a block used on a stream other than its allocating
// thread's must be synchronised with that stream (or the other stream synchronised on the host)
// before it is freed. device_free makes no CUDA call, from whichever thread it runs, unless the
// allocating thread has exited (then the block goes back to cudaFree).
struct DeviceCacheStats {
  size_t reserved_bytes = 0;       // held from cudaMalloc: in use plus cached
  size_t peak_reserved_bytes = 0;  // since the process started
  size_t in_use_bytes = 0;         // blocks held by tensors (rounded block sizes)
  size_t cached_bytes = 0;         // free blocks kept for reuse
  size_t malloc_calls = 0;         // cudaMalloc calls that returned memory
  size_t free_calls = 0;           // cudaFree calls
  size_t oom_retries = 0;          // out-of-memory errors answered by emptying the cache
};
// The caching allocator's figures for one CUDA device, all threads together. Tensors' per-rank
// accounting is MemoryTracker's (meshtrain/core/memory.h).
DeviceCacheStats device_cache_stats(Device device);
// Synchronises the device and returns every cached free block of every thread to CUDA (no-op on
// CPU).
void release_cached_device_memory(Device device);

}  // namespace meshtrain
