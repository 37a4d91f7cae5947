#include "meshtrain/core/tensor.h"

#include <cstring>
#include <sstream>

#include "meshtrain/core/bf16.h"
#include "meshtrain/core/device_memory.h"
#include "meshtrain/core/error.h"

namespace meshtrain {

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    MT_CHECK(d >= 0, "negative dimension ", d, " in shape ", shape_string(shape));
    n *= d;
  }
  return n;
}

std::string shape_string(const Shape& shape) {
  std::ostringstream out;
  out << '[';
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << ']';
  return out.str();
}

namespace {
void* allocate(size_t bytes, Device device, HostMemory host_memory) {
  if (host_memory == HostMemory::pageable) return device_alloc(device, bytes);
  MT_CHECK(device.is_cpu(), "pinned memory is host memory, not ", to_string(device));
  return pinned_host_alloc(bytes);
}
}  // namespace

Storage::Storage(size_t bytes, Device device, HostMemory host_memory)
    : data_(allocate(bytes, device, host_memory)),
      bytes_(bytes),
      device_(device),
      pinned_(host_memory == HostMemory::pinned),
      tracker_(current_memory_tracker()),
      category_(current_memory_category()) {
  if (tracker_) tracker_->on_alloc(device_, category_, bytes_);
}

Storage::~Storage() {
  if (pinned_)
    pinned_host_free(data_, bytes_);
  else
    device_free(device_, data_, bytes_);
  if (tracker_) tracker_->on_free(device_, category_, bytes_);
}

Tensor::Tensor(std::shared_ptr<Storage> storage, int64_t offset, Shape shape, DType dtype)
    : storage_(std::move(storage)),
      offset_(offset),
      shape_(std::move(shape)),
      numel_(shape_numel(shape_)),
      dtype_(dtype) {}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  const size_t bytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
  return Tensor(std::make_shared<Storage>(bytes, device), 0, shape, dtype);
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.zero_();
  return t;
}

Tensor Tensor::empty_pinned(const Shape& shape, DType dtype) {
  const size_t bytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
  return Tensor(std::make_shared<Storage>(bytes, Device::cpu(), HostMemory::pinned), 0, shape,
                dtype);
}

Tensor Tensor::from_vector(const std::vector<float>& values, const Shape& shape) {
  Tensor t = empty(shape, DType::f32);
  MT_CHECK(static_cast<int64_t>(values.size()) == t.numel(), "expected ", t.numel(),
           " values for shape ", shape_string(shape), ", got ", values.size());
  if (!values.empty()) std::memcpy(t.raw_data(), values.data(), t.nbytes());
  return t;
}

Tensor Tensor::from_vector(const std::vector<int32_t>& values, const Shape& shape) {
  Tensor t = empty(shape, DType::i32);
  MT_CHECK(static_cast<int64_t>(values.size()) == t.numel(), "expected ", t.numel(),
           " values for shape ", shape_string(shape), ", got ", values.size());
  if (!values.empty()) std::memcpy(t.raw_data(), values.data(), t.nbytes());
  return t;
}

int64_t Tensor::dim(int i) const {
  const int n = ndim();
  MT_CHECK(i >= -n && i < n, "dim ", i, " out of range for ", describe());
  return shape_[i < 0 ? i + n : i];
}

void* Tensor::raw_data() const {
  MT_CHECK(defined(), "access to an undefined tensor");
  if (device().is_meta())
    throw NotSupported(detail::concat(describe(), " is shape-only (a dry run): it has no data"));
  if (!storage_->data()) return nullptr;
  return static_cast<char*>(storage_->data()) + offset_ * dtype_size(dtype_);
}

template <typename T>
T* Tensor::data() const {
  if constexpr (std::is_same_v<T, float>) {
    MT_CHECK(dtype_ == DType::f32, "expected an f32 tensor, got ", describe());
  } else if constexpr (std::is_same_v<T, BF16>) {
    MT_CHECK(dtype_ == DType::bf16, "expected a bf16 tensor, got ", describe());
  } else if constexpr (std::is_same_v<T, int32_t>) {
    MT_CHECK(dtype_ == DType::i32, "expected an i32 tensor, got ", describe());
  } else {
    static_assert(sizeof(T) == 0, "Tensor::data<T>: T must be float, BF16 or int32_t");
  }
  return static_cast<T*>(raw_data());
}
template float* Tensor::data<float>() const;
template BF16* Tensor::data<BF16>() const;
template int32_t* Tensor::data<int32_t>() const;

Tensor Tensor::view(int64_t offset, const Shape& shape) const {
  MT_CHECK(defined(), "view of an undefined tensor");
  const int64_t n = shape_numel(shape);
  MT_CHECK(offset >= 0 && offset + n <= numel_, "view of ", n, " elements at offset ", offset,
           " exceeds ", describe());
  return Tensor(storage_, offset_ + offset, shape, dtype_);
}

Tensor Tensor::reshape(const Shape& shape) const {
  MT_CHECK(shape_numel(shape) == numel_, "reshape of ", describe(), " to ", shape_string(shape),
           ": the shape must hold its ", numel_, " elements");
  return Tensor(storage_, offset_, shape, dtype_);
}

Tensor Tensor::rows(int64_t begin, int64_t count) const {
  MT_CHECK(ndim() >= 1, "rows() needs a tensor with dimensions, got ", describe());
  MT_CHECK(begin >= 0 && count >= 0 && begin + count <= shape_[0], "rows [", begin, ", ",
           begin + count, ") outside ", describe());
  Shape shape = shape_;
  shape[0] = count;
  const int64_t row = shape_[0] == 0 ? 0 : numel_ / shape_[0];
  return Tensor(storage_, offset_ + begin * row, shape, dtype_);
}

void Tensor::zero_() const {
  if (device().is_meta()) return;
  device_memset_zero(device(), raw_data(), nbytes());
}

void Tensor::copy_from(const Tensor& src) const {
  MT_CHECK(dtype_ == src.dtype_ && numel_ == src.numel_, "copy from ", src.describe(), " into ",
           describe(), ": the dtypes and element counts must match");
  if (device().is_meta()) return;  // nothing to write: the copy only had to be valid
  device_memcpy(raw_data(), device(), src.raw_data(), src.device(), nbytes());
}

Tensor Tensor::to(Device device) const {
  if (this->device().is_meta() && !device.is_meta())  // before allocating the copy
    throw NotSupported(detail::concat(describe(), " is shape-only (a dry run): it has no data"));
  Tensor out = empty(shape_, dtype_, device);
  out.copy_from(*this);
  return out;
}

Tensor Tensor::on(Device device) const { return this->device() == device ? *this : to(device); }

std::vector<float> Tensor::to_vector() const {
  const Tensor host = on(Device::cpu());
  std::vector<float> out(static_cast<size_t>(numel_));
  switch (dtype_) {
    case DType::f32:
      if (numel_) std::memcpy(out.data(), host.raw_data(), nbytes());
      break;
    case DType::bf16:
      for (int64_t i = 0; i < numel_; ++i) out[i] = to_f32(host.data<BF16>()[i]);
      break;
    case DType::i32:
      for (int64_t i = 0; i < numel_; ++i) out[i] = static_cast<float>(host.data<int32_t>()[i]);
      break;
  }
  return out;
}

std::string Tensor::describe() const {
  if (!defined()) return "undefined tensor";
  return detail::concat(dtype_name(dtype_), shape_string(shape_), " on ", to_string(device()),
                        pinned() ? " (pinned)" : "");
}

}  // namespace meshtrain
