#include "meshtrain/checkpoint/shard_reader.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <iomanip>
#include <sstream>

#include "meshtrain/core/error.h"
#include "meshtrain/mesh/box_runs.h"

namespace meshtrain {

namespace {

constexpr uint64_t kMaxWindowBytes = 64u << 20;  // bounds the read buffer, whatever the slice size

// Checks that the shard exists with the size the index gives before its header is parsed, so
// that a truncated shard is reported as such.
const std::string& checked_shard(const std::string& path, uint64_t expected_bytes) {
  std::error_code error;
  const bool present = std::filesystem::is_regular_file(path, error);
  if (!present) throw IoError(detail::concat("shard file '", path, "' is missing"));
  const uint64_t bytes = std::filesystem::file_size(path, error);
  if (error) throw IoError(detail::concat("cannot stat shard '", path, "': ", error.message()));
  if (bytes != expected_bytes)
    throw IoError(detail::concat("shard '", path, "' holds ", bytes, " bytes, the index says ",
                                 expected_bytes, bytes < expected_bytes ? " (truncated)" : ""));
  return path;
}

// Bytes [begin, end) of a slice's data that land at byte `dest` of the output.
struct ByteRun {
  uint64_t begin, end, dest;
};

std::string hex(uint32_t value) {
  std::ostringstream out;
  out << "0x" << std::hex << std::setw(8) << std::setfill('0') << value;
  return out.str();
}

}  // namespace

ShardReader::ShardReader(const std::string& path, uint64_t expected_bytes, uint64_t chunk_bytes)
    : path_(path), chunk_bytes_(chunk_bytes), file_(checked_shard(path, expected_bytes)) {}

void ShardReader::check_entry(std::string_view tensor, const StoredSlice& slice) const {
  const SafetensorsEntry* entry = file_.find(slice.key);
  if (entry == nullptr || entry->dtype != "F32" || entry->shape != slice.box.shape)
    throw IoError(detail::concat(
        "shard '", path_, "': tensor '", tensor, "': slice '", slice.key, "' ",
        entry == nullptr ? std::string("is missing")
                         : detail::concat("is ", entry->dtype, shape_string(entry->shape),
                                          ", the index says F32", shape_string(slice.box.shape))));
}

void ShardReader::read(std::string_view tensor, const StoredSlice& slice, const TensorSlice& part,
                       float* out) {
  check_entry(tensor, slice);
  const uint64_t chunk = chunk_bytes_;
  const uint64_t slice_bytes =
      static_cast<uint64_t>(shape_numel(slice.box.shape)) * kCheckpointElementBytes;
  // Windows never cross a multiple of `block` bytes, which bounds the buffer.
  const uint64_t block = std::max<uint64_t>(1, kMaxWindowBytes / chunk) * chunk;
  TensorSlice in_slice = part;
  for (size_t d = 0; d < part.offset.size(); ++d) in_slice.offset[d] -= slice.box.offset[d];
  std::vector<ByteRun> runs;
  for_each_box_run(slice.box.shape, in_slice, [&](int64_t at, int64_t in_part, int64_t count) {
    uint64_t begin = static_cast<uint64_t>(at) * kCheckpointElementBytes;
    const uint64_t end = begin + static_cast<uint64_t>(count) * kCheckpointElementBytes;
    uint64_t dest = static_cast<uint64_t>(in_part) * kCheckpointElementBytes;
    while (begin < end) {
      const uint64_t stop = std::min(end, (begin / block + 1) * block);
      runs.push_back({begin, stop, dest});
      dest += stop - begin;
      begin = stop;
    }
  });
  const auto chunks_end = [&](uint64_t byte_end) { return (byte_end + chunk - 1) / chunk; };
  for (size_t r = 0; r < runs.size();) {
    // One window: the chunks of consecutive runs whose chunks touch, inside one block.
    const uint64_t first = runs[r].begin / chunk;
    uint64_t last = chunks_end(runs[r].end);
    size_t e = r + 1;
    while (e < runs.size() && runs[e].begin / chunk <= last &&
           runs[e].begin / block == runs[r].begin / block)
      last = std::max(last, chunks_end(runs[e++].end));
    const uint64_t window_begin = first * chunk;
    const uint64_t window_end = std::min(last * chunk, slice_bytes);
    window_.resize(window_end - window_begin);
    file_.read_bytes(slice.key, window_begin, window_.size(), window_.data());
    bytes_read_ += window_.size();
    for (uint64_t c = first; c < last; ++c) {
      const uint64_t at = c * chunk - window_begin;
      const uint64_t size = std::min(chunk, window_.size() - at);
      const auto crc = static_cast<uint32_t>(crc32_z(0, window_.data() + at, size));
      if (crc != slice.crc32[c])
        throw IoError(detail::concat(
            "shard '", path_, "': tensor '", tensor, "': slice '", slice.key, "': chunk ", c,
            " (bytes ", c * chunk, " to ", c * chunk + size, ") has CRC32 ", hex(crc),
            ", the index says ", hex(slice.crc32[c]), ": the shard is corrupted"));
    }
    for (; r < e; ++r)
      std::memcpy(reinterpret_cast<unsigned char*>(out) + runs[r].dest,
                  window_.data() + (runs[r].begin - window_begin), runs[r].end - runs[r].begin);
  }
}

}  // namespace meshtrain
