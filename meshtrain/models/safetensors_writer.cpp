#include <cerrno>
#include <cstring>

#include <nlohmann/json.hpp>

#include "meshtrain/core/bf16.h"
#include "meshtrain/core/error.h"
#include "meshtrain/models/safetensors.h"

namespace meshtrain {

namespace {
// The system's reason for the stream operation that just failed ("File too large", "No space left
// on device"), when it left one in errno.
std::string system_reason() {
  return errno ? detail::concat(": ", std::strerror(errno)) : std::string();
}
}  // namespace

SafetensorsWriter::SafetensorsWriter(const std::string& path, std::vector<SafetensorsSpec> specs,
                                     const std::map<std::string, std::string>& metadata)
    : path_(path), specs_(std::move(specs)) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const SafetensorsSpec& spec : specs_) {
    MT_CHECK(spec.dtype == DType::f32 || spec.dtype == DType::bf16, "safetensors '", path,
             "': tensor '", spec.name, "' must be stored as f32 or bf16, got ",
             dtype_name(spec.dtype));
    MT_CHECK(!spec.name.empty() && spec.name != "__metadata__" && !header.contains(spec.name),
             "safetensors '", path, "': tensor name '", spec.name,
             "' is empty, reserved or repeated");
    const uint64_t bytes = static_cast<uint64_t>(shape_numel(spec.shape)) * dtype_size(spec.dtype);
    header[spec.name] = {{"dtype", spec.dtype == DType::f32 ? "F32" : "BF16"},
                         {"shape", spec.shape},
                         {"data_offsets", {offset, offset + bytes}}};
    begins_.push_back(offset);
    offset += bytes;
  }
  written_.assign(specs_.size(), 0);
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data section starts 8-byte aligned
  const uint64_t header_bytes = text.size();
  data_start_ = 8 + header_bytes;
  errno = 0;
  file_.open(path, std::ios::binary | std::ios::out | std::ios::trunc);
  if (!file_)
    throw IoError(detail::concat("cannot create safetensors file '", path, "'", system_reason()));
  file_.write(reinterpret_cast<const char*>(&header_bytes), 8);
  file_.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (!file_)
    throw IoError(detail::concat("writing the header of '", path, "' failed", system_reason()));
}

void SafetensorsWriter::write(std::string_view name, const Tensor& value, int64_t offset) {
  size_t i = 0;
  while (i < specs_.size() && specs_[i].name != name) ++i;
  MT_CHECK(i < specs_.size(), "safetensors '", path_, "': tensor '", name, "' was not declared");
  const SafetensorsSpec& spec = specs_[i];
  const int64_t count = value.numel(), total = shape_numel(spec.shape);
  MT_CHECK(offset >= 0 && offset + count <= total, "safetensors '", path_, "': writing elements [",
           offset, ", ", offset + count, ") of '", name, "', which has ", total);
  MT_CHECK(value.dtype() == DType::f32 || value.dtype() == DType::bf16, "safetensors '", path_,
           "': tensor '", name, "' must be f32 or bf16, got ", value.describe());
  const Tensor host = value.on(Device::cpu());
  const size_t size = dtype_size(spec.dtype);
  // Same dtype: straight from the tensor; otherwise through a converted buffer.
  const bool same_dtype = value.dtype() == spec.dtype;
  std::vector<char> buffer(same_dtype ? 0 : static_cast<size_t>(count) * size);
  if (!same_dtype && spec.dtype == DType::bf16) {
    auto* dst = reinterpret_cast<BF16*>(buffer.data());
    for (int64_t k = 0; k < count; ++k) dst[k] = to_bf16(host.data<float>()[k]);
  } else if (!same_dtype) {
    auto* dst = reinterpret_cast<float*>(buffer.data());
    for (int64_t k = 0; k < count; ++k) dst[k] = to_f32(host.data<BF16>()[k]);
  }
  errno = 0;
  file_.seekp(static_cast<std::streamoff>(data_start_ + begins_[i] + offset * size));
  if (count)
    file_.write(same_dtype ? static_cast<const char*>(host.raw_data()) : buffer.data(),
                static_cast<std::streamsize>(count * size));
  if (!file_)
    throw IoError(detail::concat("writing tensor '", name, "' to '", path_, "' failed",
                                 system_reason()));
  written_[i] += count;
}

void SafetensorsWriter::finish() {
  for (size_t i = 0; i < specs_.size(); ++i)
    if (written_[i] != shape_numel(specs_[i].shape))
      throw IoError(detail::concat("safetensors '", path_, "': tensor '", specs_[i].name, "' got ",
                                   written_[i], " of its ", shape_numel(specs_[i].shape),
                                   " elements before finish()"));
  errno = 0;
  file_.close();  // flushes what the stream still buffers
  if (!file_) throw IoError(detail::concat("closing '", path_, "' failed", system_reason()));
}

}  // namespace meshtrain
