// The caching allocator of one device, as PyTorch's CUDA caching allocator: blocks freed by
// tensors are kept and handed out again instead of going back to cudaFree (which synchronises the
// whole device) and cudaMalloc (slow). The raw operations come through RawDeviceMemory, so that
// everything here runs and is tested on the CPU.
//
// Streams: every kernel and copy of a thread runs on that thread's stream, so a block belongs to
// the pool of the thread that allocated it (its owner). A freed block goes back to its owner's
// free list, from whichever thread frees it, and only the owner allocates from that list: its
// reuse is ordered after the owner stream's earlier work on it. A block used on another stream
// must be synchronised with the owner stream before it is freed (see meshtrain/core/device_memory.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "meshtrain/core/device.h"
#include "meshtrain/core/device_memory.h"

namespace meshtrain {

// Requests are rounded to limit fragmentation (blocks are never split): below 1 MiB up to a
// multiple of 512 bytes; from 1 MiB on, up to one of 4 sizes per power of two, which wastes less
// than a quarter of the request.
size_t device_block_size(size_t bytes);
inline constexpr size_t kLargestDeviceBlock = size_t{1} << 48;  // 256 TiB, beyond any device

// The raw operations of one device.
class RawDeviceMemory {
 public:
  virtual ~RawDeviceMemory() = default;
  // A new block of exactly `bytes`, or nullptr when the device is out of memory (with the
  // device's error state cleared). Other failures throw.
  virtual void* allocate(size_t bytes) = 0;
  // Errors are ignored: it also runs at thread and process exit, when the runtime may be gone.
  virtual void free(void* ptr) noexcept = 0;
  // Blocks until the calling thread's stream on this device has finished its work.
  virtual void synchronize_calling_stream() = 0;
  // Blocks until all work on the device has finished.
  virtual void synchronize_device() = 0;
};

// Thread-safe. Pools are opened and closed by the thread-binding layer (meshtrain/core/device_memory.cpp):
// one per (device, thread), closed when the thread exits.
class DeviceBlockCache {
 public:
  enum class PoolId : uint64_t {};

  DeviceBlockCache(Device device, std::unique_ptr<RawDeviceMemory> raw);
  // Keeps whatever is cached: caches live as long as the process (frees may come at its end).
  ~DeviceBlockCache() = default;
  DeviceBlockCache(const DeviceBlockCache&) = delete;
  DeviceBlockCache& operator=(const DeviceBlockCache&) = delete;

  PoolId open_pool();
  // On the owner thread, as it exits: waits for its stream, returns the pool's free blocks to the
  // device and forgets the pool; blocks it still has out go straight back to the device when
  // freed. Never throws (errors of a runtime that is shutting down are ignored).
  void close_pool(PoolId pool) noexcept;

  // A block of at least `bytes` (> 0) for the owner of `pool`: one of its free blocks of the same
  // size class, or a new one. On out of memory, synchronises the device, returns every cached
  // block to it and retries once; throws Error with the figures if that fails too.
  void* allocate(PoolId pool, size_t bytes);
  // Returns the block to its owner's free list (no raw call), or to the device when the owner
  // has exited. Any thread may free. InvalidArgument for a pointer this cache does not hold out.
  void free(void* ptr);
  // Synchronises the device and returns every pool's free blocks to it.
  void release_cached();

  DeviceCacheStats stats() const;

 private:
  struct Block {
    PoolId owner;
    size_t size;  // the rounded size
  };
  struct Pool {
    std::unordered_map<size_t, std::vector<void*>> free_by_size;
  };

  void* take_free_block(Pool& pool, size_t size);  // nullptr when the pool has none of that size
  void* allocate_raw(size_t size);                 // counts it; nullptr on out of memory
  // Synchronises the device, releases every pool's free blocks and retries; throws on failure.
  void* allocate_after_releasing_cache(size_t bytes, size_t size);
  void free_raw(void* ptr, size_t size) noexcept;  // counts it
  void release_free_blocks(Pool& pool) noexcept;
  void release_all_free_blocks() noexcept;

  const Device device_;
  const std::unique_ptr<RawDeviceMemory> raw_;
  mutable std::mutex mutex_;  // guards everything below, and raw_ calls but close_pool's wait
  uint64_t next_pool_ = 0;
  std::unordered_map<PoolId, Pool> pools_;    // the open pools
  std::unordered_map<void*, Block> in_use_;   // blocks handed out, by address
  DeviceCacheStats stats_;
};

}  // namespace meshtrain
