// The weights of a Hugging Face model as one set of tensors, whether transformers saved them in one
// file (model.safetensors) or sharded them over several beside an index
// (model.safetensors.index.json: {"metadata": {"total_size": N}, "weight_map": {"tensor name":
// "model-00001-of-00002.safetensors", ...}}). Readers of a model take either path and need not
// know which kind it is; like SafetensorsReader, a tensor (or a slice of one) is read only when
// asked, so a rank reads only its own pieces of each shard.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "meshtrain/models/safetensors.h"

namespace meshtrain {

class SafetensorsSet {
 public:
  // `path` is a safetensors file, or an index (a name ending in ".json") whose weight_map names
  // shard files in its own folder. Each shard is opened once and checked against the index: every
  // tensor the index names is in the shard it names, and no shard holds a tensor that the index
  // does not name or names elsewhere. IoError naming the index and the key for unreadable or
  // invalid JSON, no weight_map, a value that is not a plain file name (no folder, no "..", not
  // absolute), a missing shard or a tensor not where the index says; IoError naming the shard for
  // a corrupt one (SafetensorsReader's checks). The index's own metadata (total_size) is not
  // checked: tools compute it differently. Every file stays open (a descriptor per shard) until
  // the set is destroyed.
  explicit SafetensorsSet(const std::string& path);

  const std::string& path() const { return path_; }
  // Every tensor of every file, sorted by name as one file's header lists them; an entry's begin
  // and end are offsets in the data section of its own file.
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }
  // The files' __metadata__ together (IoError at construction when two shards give one key
  // different values).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const SafetensorsEntry* find(std::string_view name) const;  // nullptr when absent

  // As SafetensorsReader::read, from the file that holds the tensor.
  void read(std::string_view name, const Tensor& out, int64_t offset = 0);

 private:
  void open_shards();  // path_ is an index: opens and checks its shards

  std::string path_;
  std::vector<std::unique_ptr<SafetensorsReader>> files_;
  std::vector<SafetensorsEntry> entries_;  // sorted by name
  std::vector<size_t> file_of_entry_;      // entries_[i] lies in files_[file_of_entry_[i]]
  std::map<std::string, std::string> metadata_;
};

}  // namespace meshtrain
