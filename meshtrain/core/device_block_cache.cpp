#include "meshtrain/core/device_block_cache.h"

#include <algorithm>
#include <bit>

#include "meshtrain/core/error.h"

namespace meshtrain {

namespace {
constexpr size_t kSmallBlockStep = 512;
constexpr size_t kLargeBlockMin = size_t{1} << 20;
constexpr size_t kClassesPerPowerOfTwo = 4;

size_t round_up(size_t bytes, size_t step) { return (bytes + step - 1) / step * step; }
}  // namespace

size_t device_block_size(size_t bytes) {
  MT_CHECK(bytes <= kLargestDeviceBlock, "a device allocation of ", bytes,
           " bytes is larger than any device (at most ", kLargestDeviceBlock, " bytes)");
  if (bytes < kLargeBlockMin) return round_up(bytes, kSmallBlockStep);
  // bytes lies in [p, 2p) for p = bit_floor(bytes): the classes are p, 1.25p, 1.5p, 1.75p, 2p, so
  // the waste is below p/4 <= bytes/4.
  return round_up(bytes, std::bit_floor(bytes) / kClassesPerPowerOfTwo);
}

DeviceBlockCache::DeviceBlockCache(Device device, std::unique_ptr<RawDeviceMemory> raw)
    : device_(device), raw_(std::move(raw)) {
  MT_CHECK(raw_ != nullptr, "a device block cache needs the raw operations of ", to_string(device));
}

DeviceBlockCache::PoolId DeviceBlockCache::open_pool() {
  std::lock_guard lock(mutex_);
  const PoolId id{next_pool_++};
  pools_.emplace(id, Pool{});
  return id;
}

void DeviceBlockCache::close_pool(PoolId pool) noexcept {
  {
    std::lock_guard lock(mutex_);
    if (!pools_.contains(pool)) return;
  }
  // The owner's stream may still be using blocks freed into its pool; once it is idle, so are
  // they (the owner queues no more work, and other threads free under the contract). Waiting
  // outside the lock keeps other threads' frees going meanwhile. If the wait fails (the runtime
  // is shutting down, or the context is broken), the raw frees below are still right: cudaFree
  // waits for the device itself.
  try {
    raw_->synchronize_calling_stream();
  } catch (...) {
  }
  std::lock_guard lock(mutex_);
  const auto it = pools_.find(pool);
  if (it == pools_.end()) return;
  release_free_blocks(it->second);
  pools_.erase(it);
}

void* DeviceBlockCache::allocate(PoolId pool_id, size_t bytes) {
  MT_CHECK(bytes > 0, "device blocks hold at least one byte, got ", bytes);
  const size_t size = device_block_size(bytes);
  std::lock_guard lock(mutex_);
  const auto pool = pools_.find(pool_id);
  MT_CHECK(pool != pools_.end(), "allocating from pool ", static_cast<uint64_t>(pool_id), " of ",
           to_string(device_), ", which is closed");
  void* ptr = take_free_block(pool->second, size);
  if (!ptr) ptr = allocate_raw(size);
  if (!ptr) ptr = allocate_after_releasing_cache(bytes, size);
  in_use_.emplace(ptr, Block{pool_id, size});
  stats_.in_use_bytes += size;
  return ptr;
}

void DeviceBlockCache::free(void* ptr) {
  std::lock_guard lock(mutex_);
  const auto it = in_use_.find(ptr);
  MT_CHECK(it != in_use_.end(), "freeing ", ptr, " on ", to_string(device_),
           ": expected a block this cache handed out and that is not freed yet");
  const Block block = it->second;
  in_use_.erase(it);
  stats_.in_use_bytes -= block.size;
  const auto owner = pools_.find(block.owner);
  if (owner == pools_.end()) {
    free_raw(ptr, block.size);  // the owner has exited; cudaFree waits for the device
    return;
  }
  owner->second.free_by_size[block.size].push_back(ptr);
  stats_.cached_bytes += block.size;
}

void DeviceBlockCache::release_cached() {
  std::lock_guard lock(mutex_);
  raw_->synchronize_device();
  release_all_free_blocks();
}

DeviceCacheStats DeviceBlockCache::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void* DeviceBlockCache::take_free_block(Pool& pool, size_t size) {
  const auto cached = pool.free_by_size.find(size);
  if (cached == pool.free_by_size.end() || cached->second.empty()) return nullptr;
  void* ptr = cached->second.back();
  cached->second.pop_back();
  stats_.cached_bytes -= size;
  return ptr;
}

void* DeviceBlockCache::allocate_after_releasing_cache(size_t bytes, size_t size) {
  // Once the device is synchronised no stream uses a free block, whichever pool holds it.
  const size_t cached_before = stats_.cached_bytes;
  raw_->synchronize_device();
  release_all_free_blocks();
  ++stats_.oom_retries;
  if (void* ptr = allocate_raw(size)) return ptr;
  throw Error(detail::concat("CUDA out of memory on ", to_string(device_), " allocating ", bytes,
                             " bytes (a block of ", size, "): ", stats_.in_use_bytes,
                             " bytes in use by tensors, ", cached_before,
                             " bytes cached (returned to the device before one retry), ",
                             stats_.peak_reserved_bytes, " bytes reserved at the peak"));
}

void* DeviceBlockCache::allocate_raw(size_t size) {
  void* ptr = raw_->allocate(size);
  if (!ptr) return nullptr;
  ++stats_.malloc_calls;
  stats_.reserved_bytes += size;
  stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
  return ptr;
}

void DeviceBlockCache::free_raw(void* ptr, size_t size) noexcept {
  raw_->free(ptr);
  ++stats_.free_calls;
  stats_.reserved_bytes -= size;
}

void DeviceBlockCache::release_free_blocks(Pool& pool) noexcept {
  for (auto& [size, blocks] : pool.free_by_size) {
    for (void* ptr : blocks) free_raw(ptr, size);
    stats_.cached_bytes -= size * blocks.size();
  }
  pool.free_by_size.clear();
}

void DeviceBlockCache::release_all_free_blocks() noexcept {
  for (auto& [id, pool] : pools_) release_free_blocks(pool);
}

}  // namespace meshtrain
