// One rank's shard file: every slice it stores is its own F32 safetensors tensor, keyed
// "name@offset" ("h.0.mlp.c_fc.weight@0,256"), so other tools can read the shards; the CRC32 of
// each chunk of a slice's data is computed as it is written, for the index.
#pragma once

#include <memory>
#include <string>

#include "meshtrain/checkpoint/checkpoint_index.h"
#include "meshtrain/models/safetensors.h"

namespace meshtrain {

std::string slice_key(std::string_view name, const TensorSlice& box);

class ShardWriter {
 public:
  // Creates `dir`/`file` for the slices planned in `tensors` (their crc32 lists empty; `file` and
  // `key` are filled in here). Tensors with no slices are reported as given.
  ShardWriter(const std::string& dir, std::string file, IndexedTensors tensors,
              uint64_t chunk_bytes);

  // Writes one planned slice whole: `values` is a host f32 tensor of the box's shape.
  void write(std::string_view name, const TensorSlice& box, const Tensor& values);
  // Checks that every slice was written, closes and syncs the file, and says what it holds.
  ShardContents finish();

 private:
  StoredSlice& planned(std::string_view name, const TensorSlice& box);

  std::string path_;
  ShardContents contents_;
  uint64_t chunk_bytes_;
  std::unique_ptr<SafetensorsWriter> writer_;
};

}  // namespace meshtrain
