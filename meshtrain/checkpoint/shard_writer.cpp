#include "meshtrain/checkpoint/shard_writer.h"

#include <zlib.h>

#include <filesystem>

#include "meshtrain/checkpoint/durable_files.h"
#include "meshtrain/core/error.h"

namespace meshtrain {

std::string slice_key(std::string_view name, const TensorSlice& box) {
  std::string key(name);
  key += '@';
  for (size_t d = 0; d < box.offset.size(); ++d) {
    if (d > 0) key += ',';
    key += std::to_string(box.offset[d]);
  }
  return key;
}

ShardWriter::ShardWriter(const std::string& dir, std::string file, IndexedTensors tensors,
                         uint64_t chunk_bytes)
    : path_((std::filesystem::path(dir) / file).string()), chunk_bytes_(chunk_bytes) {
  contents_.file = std::move(file);
  contents_.tensors = std::move(tensors);
  std::vector<SafetensorsSpec> specs;
  for (auto& [name, tensor] : contents_.tensors)
    for (StoredSlice& s : tensor.slices) {
      s.file = contents_.file;
      s.key = slice_key(name, s.box);
      specs.push_back({s.key, DType::f32, s.box.shape});
    }
  writer_ = std::make_unique<SafetensorsWriter>(path_, std::move(specs));
}

StoredSlice& ShardWriter::planned(std::string_view name, const TensorSlice& box) {
  const auto it = contents_.tensors.find(name);
  if (it != contents_.tensors.end())
    for (StoredSlice& s : it->second.slices)
      if (s.box == box) return s;
  throw InvalidArgument(detail::concat("shard '", path_, "': no slice of '", name, "' at offset ",
                                       shape_string(box.offset), " was planned"));
}

void ShardWriter::write(std::string_view name, const TensorSlice& box, const Tensor& values) {
  StoredSlice& slice = planned(name, box);
  MT_CHECK(slice.crc32.empty(), "shard '", path_, "': slice '", slice.key, "' written twice");
  MT_CHECK(values.device().is_cpu() && values.dtype() == DType::f32 &&
               values.numel() == shape_numel(box.shape),
           "shard '", path_, "': slice '", slice.key, "' of shape ", shape_string(box.shape),
           " needs a host f32 tensor of as many elements, got ", values.describe());
  writer_->write(slice.key, values);
  const auto* bytes = static_cast<const unsigned char*>(values.raw_data());
  const uint64_t total = values.nbytes();
  for (uint64_t at = 0; at < total; at += chunk_bytes_)
    slice.crc32.push_back(
        static_cast<uint32_t>(crc32_z(0, bytes + at, std::min(chunk_bytes_, total - at))));
}

ShardContents ShardWriter::finish() {
  for (const auto& [name, tensor] : contents_.tensors)
    for (const StoredSlice& s : tensor.slices)
      MT_CHECK(!s.crc32.empty() || shape_numel(s.box.shape) == 0, "shard '", path_, "': slice '",
               s.key, "' was never written");
  writer_->finish();
  sync_file(path_);
  std::error_code error;
  contents_.bytes = std::filesystem::file_size(path_, error);
  if (error) throw IoError(detail::concat("cannot stat '", path_, "': ", error.message()));
  return contents_;
}

}  // namespace meshtrain
