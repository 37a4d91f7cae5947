// Tensor: shape + dtype + device over shared contiguous storage, with views at an offset.
// Tensors are cheap handles: copying one shares the storage (like torch.Tensor). A tensor on
// Device::meta() is shape-only: its allocation is counted by the memory tracker but not backed,
// zero_() and copies into it do nothing, and reading its data (raw_data, data, a copy out of it)
// raises NotSupported.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "meshtrain/core/device.h"
#include "meshtrain/core/dtype.h"
#include "meshtrain/core/memory.h"

namespace meshtrain {

using Shape = std::vector<int64_t>;
int64_t shape_numel(const Shape& shape);
std::string shape_string(const Shape& shape);  // "[2, 3]"

// Where a host allocation comes from: ordinary (pageable) memory, or page-locked memory that GPU
// copies reach directly (pinned_host_alloc).
enum class HostMemory { pageable, pinned };

// Owns one allocation and charges it to the tracker and category current at creation.
class Storage {
 public:
  Storage(size_t bytes, Device device, HostMemory host_memory = HostMemory::pageable);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }
  bool pinned() const { return pinned_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  Device device_;
  bool pinned_ = false;
  MemoryTracker* tracker_ = nullptr;
  MemoryCategory category_ = MemoryCategory::other;
};

class Tensor {
 public:
  Tensor() = default;  // undefined: no storage

  static Tensor empty(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
  // A host tensor in pinned memory (pinned_host_alloc): what GPU copies stream from and into.
  static Tensor empty_pinned(const Shape& shape, DType dtype);
  // A host f32 (or i32) tensor holding the given values; values.size() must equal the numel.
  static Tensor from_vector(const std::vector<float>& values, const Shape& shape);
  static Tensor from_vector(const std::vector<int32_t>& values, const Shape& shape);

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  int ndim() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int i) const;  // negative i counts from the end
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return static_cast<size_t>(numel_) * dtype_size(dtype_); }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_ ? storage_->device() : Device::cpu(); }
  bool pinned() const { return storage_ && storage_->pinned(); }
  int64_t offset() const { return offset_; }  // in elements, into the storage
  const std::shared_ptr<Storage>& storage() const { return storage_; }

  void* raw_data() const;
  template <typename T>
  T* data() const;  // checks that T matches the dtype

  // Views share storage. view() takes an element offset relative to this tensor's start.
  Tensor view(int64_t offset, const Shape& shape) const;
  Tensor reshape(const Shape& shape) const;
  Tensor flatten() const { return reshape({numel_}); }
  Tensor rows(int64_t begin, int64_t count) const;  // slice along dim 0

  void zero_() const;  // handles are const; the data they point to is not
  void copy_from(const Tensor& src) const;  // same dtype and numel; any devices
  Tensor to(Device device) const;     // a copy on the given device
  Tensor on(Device device) const;     // this tensor when it is on `device`, else to(device)
  Tensor clone() const { return to(device()); }
  // Values as f32 on the host (bf16 and i32 are converted).
  std::vector<float> to_vector() const;

  std::string describe() const;  // "f32[2, 3] on cpu"

 private:
  Tensor(std::shared_ptr<Storage> storage, int64_t offset, Shape shape, DType dtype);

  std::shared_ptr<Storage> storage_;
  int64_t offset_ = 0;
  Shape shape_;
  int64_t numel_ = 0;
  DType dtype_ = DType::f32;
};

}  // namespace meshtrain
