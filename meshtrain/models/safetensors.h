// The safetensors format: an 8-byte little-endian header length n, n bytes of JSON
// {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {..}},
// then the data section (offsets are relative to its start). meshtrain reads and writes F32 and
// BF16 tensors, converting to and from f32 / bf16 tensors on any device.
//
// Both sides stream: the reader parses only the header and reads a tensor (or a slice of one, for
// a rank that holds a dim-0 shard) when asked; the writer lays out the header from declared names,
// dtypes and shapes, then takes tensors one by one in any order (each element exactly once, pieces
// at an element offset allowed). A sharded model can therefore save one unit at a time without
// holding all its parameters.
#pragma once

#include <cstdint>
#include <fstream>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "meshtrain/core/tensor.h"

namespace meshtrain {

// The most elements, and the largest dim, of a tensor read from a file: 2^48 (1 PiB of F32), far
// past any model and low enough that byte counts computed from them cannot overflow.
inline constexpr uint64_t kMaxFileTensorElements = uint64_t{1} << 48;

struct SafetensorsEntry {
  std::string name;
  std::string dtype;  // as in the file: "F32", "BF16", "F16", "I64", ...
  Shape shape;
  uint64_t begin = 0;  // byte offsets into the data section
  uint64_t end = 0;
};

class SafetensorsReader {
 public:
  // Parses and checks the header: IoError naming the path and the key or offset for a short or
  // corrupt file, bad JSON, an unknown dtype, offsets that disagree with the shape, overlap, or
  // data past the end of the file (truncated).
  explicit SafetensorsReader(const std::string& path);

  const std::vector<SafetensorsEntry>& entries() const { return entries_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const SafetensorsEntry* find(std::string_view name) const;  // nullptr when absent

  // Reads elements [offset, offset + out.numel()) of the flattened tensor into out (f32 or bf16,
  // any device), converting from the file's F32 or BF16. InvalidArgument for an absent name,
  // another dtype or a range outside the tensor.
  void read(std::string_view name, const Tensor& out, int64_t offset = 0);
  // Reads bytes [begin, begin + count) of a tensor's data as stored, with no conversion: how a
  // checkpoint reads part of a slice and checks it against its CRCs. InvalidArgument for an absent
  // name or a range outside the tensor's data; IoError when the file cannot be read.
  void read_bytes(std::string_view name, uint64_t begin, uint64_t count, void* out);

 private:
  std::string path_;
  std::ifstream file_;
  uint64_t data_start_ = 0;
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;
};

struct SafetensorsSpec {
  std::string name;
  DType dtype;  // f32 or bf16: how the tensor is stored in the file
  Shape shape;
};

class SafetensorsWriter {
 public:
  // Creates the file and writes its header; the data follows through write().
  SafetensorsWriter(const std::string& path, std::vector<SafetensorsSpec> specs,
                    const std::map<std::string, std::string>& metadata = {});

  // Writes value (f32 or bf16, any device) as elements [offset, offset + value.numel()) of the
  // declared tensor, converting to its declared dtype.
  void write(std::string_view name, const Tensor& value, int64_t offset = 0);
  // Checks that every declared element was written and closes the file; IoError otherwise.
  // A writer destroyed without finish() leaves an incomplete file.
  void finish();

 private:
  std::string path_;
  std::ofstream file_;
  uint64_t data_start_ = 0;
  std::vector<SafetensorsSpec> specs_;
  std::vector<uint64_t> begins_;
  std::vector<int64_t> written_;  // elements written per tensor
};

}  // namespace meshtrain
