// The index of a checkpoint (index.json): for every global tensor its shape and the slices that
// tile it, each slice naming the shard file and key that hold it and the CRC32 of every chunk of
// its data. The schema is documented in docs/checkpoint.md.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "meshtrain/core/tensor.h"
#include "meshtrain/mesh/layout.h"

namespace meshtrain {

inline constexpr uint64_t kCheckpointElementBytes = 4;  // every slice is stored as F32
// The largest chunk_bytes an index may give (CheckpointSaveOptions' limit): bounds a reader's
// window and keeps chunk arithmetic far from overflow.
inline constexpr uint64_t kMaxCheckpointChunkBytes = uint64_t{1} << 30;
// The largest index.json a reader reads. An index takes about 250 bytes per slice (plus 18 per MiB
// of data for its CRCs): 64 MiB is some 250 000 slices, GPT-2 large with its AdamW moments under
// FSDP over about 200 ranks. A larger file is not an index meshtrain wrote, and would be read
// whole into memory (every rank parses the whole index).
inline constexpr uint64_t kMaxCheckpointIndexBytes = uint64_t{64} << 20;

struct StoredSlice {
  std::string file;             // shard file name inside the checkpoint directory
  std::string key;              // its safetensors key there
  TensorSlice box;              // where it sits in the global tensor
  std::vector<uint32_t> crc32;  // one per chunk_bytes of its data, the last chunk possibly shorter
};

struct IndexedTensor {
  Shape shape;
  std::vector<StoredSlice> slices;
};

using IndexedTensors = std::map<std::string, IndexedTensor, std::less<>>;

// What one rank's shard file holds: the slices it wrote, and the tensors it was given (listed even
// when it holds none of their elements, so that every tensor reaches the index).
struct ShardContents {
  std::string file;
  uint64_t bytes = 0;  // the file's size
  IndexedTensors tensors;
};

struct CheckpointIndex {
  int64_t step = 0;
  int world = 1;
  uint64_t chunk_bytes = 0;
  nlohmann::json metadata;                // the caller's, as given
  std::map<std::string, uint64_t> files;  // shard file name -> its size in bytes
  IndexedTensors tensors;
};

// Chunks of `chunk_bytes` covering a slice's data.
uint64_t chunk_count(const TensorSlice& box, uint64_t chunk_bytes);

// Whether `box` lies inside a tensor of `shape` (of the same rank), checked without overflow
// whatever its numbers.
bool box_inside(const TensorSlice& box, const Shape& shape);

// Merges every rank's shard into the index. InvalidArgument naming the tensor when ranks disagree
// on its global shape or when its slices do not tile it exactly (a replicated tensor written by
// more than one rank overlaps itself).
CheckpointIndex build_index(int64_t step, uint64_t chunk_bytes, const nlohmann::json& metadata,
                            const std::vector<ShardContents>& shards);

nlohmann::json index_to_json(const CheckpointIndex& index);
// Parses and validates an index read from `path` (named in errors): IoError for a wrong format or
// version, a missing or mistyped field, a number out of range (a shape past
// kMaxFileTensorElements, chunk_bytes past kMaxCheckpointChunkBytes, a world other than the
// number of files), a file name that is not a plain name inside the checkpoint folder, a slice in
// an unlisted file or larger than its file, a key other than the one its tensor and offset give, a
// CRC list of the wrong length, slices that do not tile their tensor, or training metadata whose
// `step` or `optimizer.steps` disagree with the index's step.
CheckpointIndex index_from_json(const nlohmann::json& json, const std::string& path);

// The form in which a rank sends its shard's contents to rank 0, and back.
nlohmann::json shard_contents_to_json(const ShardContents& shard);
ShardContents shard_contents_from_json(const nlohmann::json& json);

}  // namespace meshtrain
