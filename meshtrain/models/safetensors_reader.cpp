#include <algorithm>
#include <bit>
#include <nlohmann/json.hpp>

#include "meshtrain/core/bf16.h"
#include "meshtrain/core/error.h"
#include "meshtrain/models/safetensors.h"

namespace meshtrain {

static_assert(std::endian::native == std::endian::little, "safetensors is little-endian");

namespace {
constexpr uint64_t kMaxHeaderBytes = 100u << 20;  // the format's own limit
constexpr int kMaxHeaderDepth = 16;  // {name: {shape: [...]}} is three levels

// Bytes per element of the safetensors dtypes; 0 for an unknown name.
uint64_t element_size(const std::string& dtype) {
  static const std::map<std::string, uint64_t> sizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E4M3", 1}, {"F8_E5M2", 1},
      {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
      {"U32", 4},  {"F32", 4}, {"I64", 8}, {"U64", 8},     {"F64", 8}};
  const auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

SafetensorsEntry parse_entry(const std::string& path, const std::string& name,
                             const nlohmann::json& info, uint64_t data_bytes) {
  const auto bad = [&](const std::string& why) {
    return IoError(detail::concat("safetensors '", path, "': tensor '", name, "': ", why));
  };
  if (!info.is_object() || !info.contains("dtype") || !info.contains("shape") ||
      !info.contains("data_offsets"))
    throw bad("expected an object with dtype, shape and data_offsets, got " + info.dump());
  SafetensorsEntry e;
  e.name = name;
  if (!info["dtype"].is_string()) throw bad("dtype must be a string");
  e.dtype = info["dtype"].get<std::string>();
  const uint64_t size = element_size(e.dtype);
  if (size == 0) throw bad("unknown dtype '" + e.dtype + "'");
  const auto& shape = info["shape"];
  if (!shape.is_array()) throw bad("shape must be an array");
  uint64_t numel = 1;
  for (const auto& d : shape) {
    if (!d.is_number_unsigned())
      throw bad("shape must hold non-negative integers, got " + shape.dump());
    // The dim too: beside a 0 it would not raise the count, and past 2^63 it is no int64_t.
    if (d.get<uint64_t>() > kMaxFileTensorElements ||
        __builtin_mul_overflow(numel, d.get<uint64_t>(), &numel) || numel > kMaxFileTensorElements)
      throw bad("shape " + shape.dump() + " holds more than 2^48 elements, or a dim past 2^48");
    e.shape.push_back(d.get<int64_t>());
  }
  const auto& offsets = info["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned())
    throw bad("data_offsets must be [begin, end], got " + offsets.dump());
  e.begin = offsets[0].get<uint64_t>();
  e.end = offsets[1].get<uint64_t>();
  if (e.end < e.begin || e.end - e.begin != numel * size)
    throw bad(detail::concat("data_offsets [", e.begin, ", ", e.end, ") do not hold ", numel,
                             " elements of ", e.dtype, " (", numel * size, " bytes)"));
  if (e.end > data_bytes)
    throw bad(detail::concat("data ends at offset ", e.end,
                             " of the data section, but the file holds only ", data_bytes,
                             " bytes of data (truncated?)"));
  return e;
}
}  // namespace

SafetensorsReader::SafetensorsReader(const std::string& path)
    : path_(path), file_(path, std::ios::binary | std::ios::ate) {
  if (!file_) throw IoError(detail::concat("cannot open safetensors file '", path, "'"));
  const auto file_bytes = static_cast<uint64_t>(file_.tellg());
  file_.seekg(0);
  uint64_t header_bytes = 0;
  if (file_bytes < 8 || !file_.read(reinterpret_cast<char*>(&header_bytes), 8))
    throw IoError(detail::concat("safetensors '", path, "': ", file_bytes,
                                 " bytes, too short for the 8-byte header length"));
  if (header_bytes > kMaxHeaderBytes || 8 + header_bytes > file_bytes)
    throw IoError(detail::concat("safetensors '", path, "': header length ", header_bytes,
                                 " at offset 0 exceeds the file (", file_bytes,
                                 " bytes) or the 100 MiB limit"));
  std::string text(header_bytes, '\0');
  file_.read(text.data(), static_cast<std::streamsize>(header_bytes));
  data_start_ = 8 + header_bytes;
  // A header is a flat object of entries; deeper nesting is refused while parsing, before any
  // error message could print it recursively.
  const auto limit_depth = [&](int depth, nlohmann::json::parse_event_t, const nlohmann::json&) {
    if (depth > kMaxHeaderDepth)
      throw IoError(detail::concat("safetensors '", path, "': header JSON nested deeper than ",
                                   kMaxHeaderDepth, " levels"));
    return true;
  };
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text, limit_depth);
  } catch (const nlohmann::json::parse_error& e) {
    throw IoError(detail::concat("safetensors '", path, "': header JSON invalid at byte ",
                                 8 + e.byte, " of the file: ", e.what()));
  } catch (const nlohmann::json::exception& e) {  // a number past double's range
    throw IoError(detail::concat("safetensors '", path, "': header JSON invalid: ", e.what()));
  }
  if (!header.is_object())
    throw IoError(detail::concat("safetensors '", path, "': header must be a JSON object"));
  for (const auto& item : header.items()) {
    if (item.key() == "__metadata__") {
      for (const auto& meta : item.value().items())
        if (meta.value().is_string()) metadata_[meta.key()] = meta.value().get<std::string>();
      continue;
    }
    entries_.push_back(parse_entry(path, item.key(), item.value(), file_bytes - data_start_));
  }
  std::vector<const SafetensorsEntry*> by_offset;
  for (const auto& e : entries_) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) {
    return std::pair(a->begin, a->end) < std::pair(b->begin, b->end);
  });
  // The format indexes the whole data section, without holes: bytes no tensor claims mean a file
  // that is not what its header says (a wrong header, or data appended).
  uint64_t covered = 0;
  for (const SafetensorsEntry* e : by_offset) {
    if (e->begin < covered)
      throw IoError(detail::concat("safetensors '", path, "': tensor '", e->name,
                                   "' overlaps the one before it at data offset ", e->begin));
    if (e->begin > covered)
      throw IoError(detail::concat("safetensors '", path, "': data bytes [", covered, ", ",
                                   e->begin, ") belong to no tensor (the format allows no holes)"));
    covered = e->end;
  }
  if (covered != file_bytes - data_start_)
    throw IoError(detail::concat("safetensors '", path, "': the tensors end at data offset ",
                                 covered, " but the file holds ", file_bytes - data_start_,
                                 " bytes of data; the rest belongs to no tensor"));
}

const SafetensorsEntry* SafetensorsReader::find(std::string_view name) const {
  for (const auto& e : entries_)
    if (e.name == name) return &e;
  return nullptr;
}

void SafetensorsReader::read(std::string_view name, const Tensor& out, int64_t offset) {
  const SafetensorsEntry* e = find(name);
  MT_CHECK(e != nullptr, "safetensors '", path_, "' has no tensor '", name, "'");
  MT_CHECK(e->dtype == "F32" || e->dtype == "BF16", "safetensors '", path_, "': tensor '", name,
           "' is ", e->dtype, "; meshtrain reads F32 and BF16");
  MT_CHECK(out.dtype() == DType::f32 || out.dtype() == DType::bf16, "safetensors read of '", name,
           "': out must be f32 or bf16, got ", out.describe());
  const uint64_t file_size = element_size(e->dtype);
  const int64_t total = shape_numel(e->shape), count = out.numel();
  MT_CHECK(offset >= 0 && offset + count <= total, "safetensors read of '", name, "': elements [",
           offset, ", ", offset + count, ") outside its ", total);

  const bool file_f32 = e->dtype == "F32";
  const bool same_dtype = file_f32 == (out.dtype() == DType::f32);
  Tensor host = out.device().is_cpu() ? out : Tensor::empty(out.shape(), out.dtype());
  // Same dtype: straight into the tensor; otherwise through a buffer that is converted.
  std::vector<char> buffer(same_dtype ? 0 : static_cast<size_t>(count) * file_size);
  char* bytes = same_dtype ? static_cast<char*>(host.raw_data()) : buffer.data();
  file_.clear();
  file_.seekg(static_cast<std::streamoff>(data_start_ + e->begin + offset * file_size));
  if (count && !file_.read(bytes, static_cast<std::streamsize>(count * file_size)))
    throw IoError(detail::concat("safetensors '", path_, "': reading tensor '", name,
                                 "' failed at file offset ", data_start_ + e->begin));
  if (!same_dtype && file_f32) {
    const auto* src = reinterpret_cast<const float*>(bytes);
    for (int64_t i = 0; i < count; ++i) host.data<BF16>()[i] = to_bf16(src[i]);
  } else if (!same_dtype) {
    const auto* src = reinterpret_cast<const BF16*>(bytes);
    for (int64_t i = 0; i < count; ++i) host.data<float>()[i] = to_f32(src[i]);
  }
  if (!out.device().is_cpu()) out.copy_from(host);
}

void SafetensorsReader::read_bytes(std::string_view name, uint64_t begin, uint64_t count,
                                   void* out) {
  const SafetensorsEntry* e = find(name);
  MT_CHECK(e != nullptr, "safetensors '", path_, "' has no tensor '", name, "'");
  MT_CHECK(begin <= e->end - e->begin && count <= e->end - e->begin - begin, "safetensors '", path_,
           "': bytes [", begin, ", ", begin + count, ") of tensor '", name, "' outside its ",
           e->end - e->begin);
  file_.clear();
  file_.seekg(static_cast<std::streamoff>(data_start_ + e->begin + begin));
  if (count && !file_.read(static_cast<char*>(out), static_cast<std::streamsize>(count)))
    throw IoError(detail::concat("safetensors '", path_, "': reading bytes [", begin, ", ",
                                 begin + count, ") of tensor '", name, "' failed at file offset ",
                                 data_start_ + e->begin + begin));
}

}  // namespace meshtrain
