// Loads a checkpoint on any mesh: each rank reads the global boxes its layout gives it, from
// whichever shards hold them (resharding on load), reading only the chunks it needs and checking
// each against its CRC32. See docs/checkpoint.md.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "meshtrain/checkpoint/checkpoint_index.h"
#include "meshtrain/core/tensor.h"
#include "meshtrain/mesh/layout.h"

namespace meshtrain {

class ShardReader;

// The newest complete checkpoint directory in `dir`: a step-N directory with index.json and the
// COMPLETE marker (a save in progress or interrupted is ignored). nullopt when there is none;
// IoError when `dir` does not exist.
std::optional<std::string> latest_checkpoint(const std::string& dir);

// One reader per rank (or thread): readers share nothing, so ranks that are threads of one
// process read concurrently.
class CheckpointReader {
 public:
  // `path`: a step-N directory. Parses and validates its index; IoError naming the file when the
  // COMPLETE marker or index.json is missing, or the index is corrupt or of another format.
  explicit CheckpointReader(std::string path);
  ~CheckpointReader();
  CheckpointReader(const CheckpointReader&) = delete;
  CheckpointReader& operator=(const CheckpointReader&) = delete;

  const std::string& path() const { return path_; }
  int64_t step() const { return index_.step; }
  int world() const { return index_.world; }                          // the mesh size that wrote it
  const nlohmann::json& metadata() const { return index_.metadata; }  // the writer's, as given
  std::vector<std::string> names() const;                             // global tensor names, sorted
  bool contains(std::string_view name) const;
  // InvalidArgument naming the checkpoint for a tensor it lacks.
  const Shape& global_shape(std::string_view name) const;

  // Fills `local` (f32, host or device, the local tensor's shape) with the global values under
  // `pieces` (Layout::local_pieces on the reading mesh). InvalidArgument for a tensor the
  // checkpoint lacks or a global shape other than the stored one (naming both); IoError naming
  // the shard and the tensor for a missing, truncated or corrupted shard.
  void read(std::string_view name, const Shape& global_shape, const Tensor& local,
            const std::vector<LocalPiece>& pieces);
  // Reads one global box into `out` (host f32, the box's shape).
  void read_box(std::string_view name, const TensorSlice& box, const Tensor& out);

  uint64_t bytes_read() const;  // slice data read from shard files so far, CRC chunks included

 private:
  const IndexedTensor& tensor(std::string_view name) const;
  ShardReader& shard(std::string_view tensor, const std::string& file);

  std::string path_;
  CheckpointIndex index_;
  std::map<std::string, std::unique_ptr<ShardReader>> shards_;  // opened when first needed
};

}  // namespace meshtrain
