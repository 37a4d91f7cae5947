// Reads parts of stored slices from one shard file: only the chunks of chunk_bytes that a part
// touches, each checked against its CRC32 before any of its bytes is used.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "meshtrain/checkpoint/checkpoint_index.h"
#include "meshtrain/models/safetensors.h"

namespace meshtrain {

class ShardReader {
 public:
  // Opens the shard and checks it: IoError when it is missing or its size is not the one the
  // index gives (a truncated or replaced file).
  ShardReader(const std::string& path, uint64_t expected_bytes, uint64_t chunk_bytes);

  // Copies `part` (a box in global coordinates, inside slice.box) of the slice of `tensor` into
  // `out`, host f32 values laid out row-major in part's shape. IoError naming the file, the tensor
  // and the chunk for a CRC mismatch, or for a key the file lacks or holds with another shape.
  void read(std::string_view tensor, const StoredSlice& slice, const TensorSlice& part, float* out);

  uint64_t bytes_read() const { return bytes_read_; }

 private:
  void check_entry(std::string_view tensor, const StoredSlice& slice) const;

  std::string path_;
  uint64_t chunk_bytes_;
  SafetensorsReader file_;
  std::vector<unsigned char> window_;  // the chunks being read, reused
  uint64_t bytes_read_ = 0;
};

}  // namespace meshtrain
