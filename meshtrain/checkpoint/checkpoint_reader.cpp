#include "meshtrain/checkpoint/checkpoint_reader.h"

#include <filesystem>

#include "meshtrain/checkpoint/checkpoint_directory.h"
#include "meshtrain/checkpoint/durable_files.h"
#include "meshtrain/checkpoint/shard_reader.h"
#include "meshtrain/core/error.h"
#include "meshtrain/core/parse_integer.h"
#include "meshtrain/mesh/box_copy.h"
#include "meshtrain/mesh/box_runs.h"

namespace meshtrain {

namespace fs = std::filesystem;

namespace {

// The COMPLETE marker holds "step N\n".
constexpr uint64_t kMaxMarkerBytes = 64;
// An index nests 6 levels, its metadata a few more. Printing or comparing deeper JSON would
// recurse once per level, overflowing the stack.
constexpr int kMaxIndexDepth = 64;

// The whole of `path` (`what`, for errors) when it is a regular file of at most `max_bytes`
// (`limit` in words): neither a huge file nor a pipe, which would block, is read.
std::string read_bounded(const std::string& what, const std::string& path, uint64_t max_bytes,
                         const std::string& limit) {
  std::error_code error;
  const uint64_t bytes = fs::file_size(path, error);
  if (error)
    throw IoError(detail::concat("cannot read ", what, " '", path, "': ", error.message()));
  if (bytes > max_bytes)
    throw IoError(detail::concat(what, " '", path, "' holds ", bytes, " bytes, expected at most ",
                                 limit));
  return read_small_file(path);
}

nlohmann::json parse_index(const std::string& text, const std::string& index_path) {
  const auto limit_depth = [&](int depth, nlohmann::json::parse_event_t, const nlohmann::json&) {
    if (depth > kMaxIndexDepth)
      throw IoError(detail::concat("checkpoint index '", index_path, "' is nested deeper than ",
                                   kMaxIndexDepth, " levels (not an index meshtrain writes)"));
    return true;
  };
  try {
    return nlohmann::json::parse(text, limit_depth);
  } catch (const nlohmann::json::exception& e) {  // malformed, or a number past double's range
    throw IoError(detail::concat("checkpoint index '", index_path, "' is not valid JSON (",
                                 text.size(), " bytes; truncated or corrupted?): ", e.what()));
  }
}

// The step is written three times: in the index, in COMPLETE and in the folder's name (when it is
// a step folder). They agree in every checkpoint meshtrain publishes; a mismatch means a copied,
// renamed or edited one, whose step would set the data position of a resumed run.
void check_step(const std::string& path, const std::string& index_path, int64_t step) {
  const std::string marker = (fs::path(path) / kCheckpointCompleteMarker).string();
  const std::string expected = detail::concat("step ", step, "\n");
  const std::string text = read_bounded("checkpoint marker", marker, kMaxMarkerBytes,
                                         detail::concat(kMaxMarkerBytes, " bytes"));
  if (text != expected) {
    const auto quoted = [](const std::string& s) {
      return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    };
    throw IoError(detail::concat("checkpoint marker '", marker, "' reads ", quoted(text),
                                 ", expected ", quoted(expected), " (the step of its index)"));
  }
  fs::path folder = fs::path(path).lexically_normal();
  if (!folder.has_filename()) folder = folder.parent_path();  // "step-00000004/"
  const std::string name = folder.filename().string();
  const auto named =
      name.starts_with("step-") ? parse_integer<int64_t>(name.substr(5)) : std::nullopt;
  if (named && *named != step)
    throw IoError(detail::concat("checkpoint index '", index_path, "': 'step' is ", step,
                                 ", but its folder '", name, "' is named for step ", *named));
}

CheckpointIndex load_index(const std::string& path) {
  const fs::path marker = fs::path(path) / kCheckpointCompleteMarker;
  std::error_code error;
  if (!fs::is_regular_file(marker, error))
    throw IoError(detail::concat("checkpoint '", path, "' is incomplete: no '",
                                 kCheckpointCompleteMarker, "' marker (an interrupted save?)"));
  const std::string index_path = (fs::path(path) / kCheckpointIndexFile).string();
  const std::string text = read_bounded("checkpoint index", index_path, kMaxCheckpointIndexBytes,
                                         detail::concat(kMaxCheckpointIndexBytes >> 20, " MiB"));
  CheckpointIndex index = index_from_json(parse_index(text, index_path), index_path);
  check_step(path, index_path, index.step);
  return index;
}

}  // namespace

std::optional<std::string> latest_checkpoint(const std::string& dir) {
  const auto found = complete_checkpoints(dir);
  if (found.empty()) return std::nullopt;
  return found.back().second;
}

CheckpointReader::CheckpointReader(std::string path)
    : path_(std::move(path)), index_(load_index(path_)) {}

CheckpointReader::~CheckpointReader() = default;

std::vector<std::string> CheckpointReader::names() const {
  std::vector<std::string> out;
  for (const auto& [name, tensor] : index_.tensors) out.push_back(name);
  return out;
}

bool CheckpointReader::contains(std::string_view name) const {
  return index_.tensors.find(name) != index_.tensors.end();
}

const IndexedTensor& CheckpointReader::tensor(std::string_view name) const {
  const auto it = index_.tensors.find(name);
  if (it == index_.tensors.end())
    throw InvalidArgument(detail::concat("checkpoint '", path_, "' has no tensor '", name,
                                         "' (it holds ", index_.tensors.size(), " tensors)"));
  return it->second;
}

const Shape& CheckpointReader::global_shape(std::string_view name) const {
  return tensor(name).shape;
}

ShardReader& CheckpointReader::shard(std::string_view tensor, const std::string& file) {
  auto& slot = shards_[file];
  if (!slot) {
    try {
      slot = std::make_unique<ShardReader>((fs::path(path_) / file).string(), index_.files.at(file),
                                           index_.chunk_bytes);
    } catch (const IoError& e) {
      shards_.erase(file);
      throw IoError(
          detail::concat("checkpoint '", path_, "': reading tensor '", tensor, "': ", e.what()));
    }
  }
  return *slot;
}

void CheckpointReader::read(std::string_view name, const Shape& global_shape, const Tensor& local,
                            const std::vector<LocalPiece>& pieces) {
  const IndexedTensor& stored = tensor(name);
  MT_CHECK(stored.shape == global_shape, "checkpoint '", path_, "': tensor '", name,
           "' is stored with shape ", shape_string(stored.shape), ", the caller expects ",
           shape_string(global_shape));
  MT_CHECK(local.dtype() == DType::f32, "checkpoint read of '", name,
           "': the local tensor must be f32, got ", local.describe());
  const Tensor host = local.device().is_cpu() ? local : Tensor::empty(local.shape());
  fill_from_boxes(host, pieces,
                  [&](const TensorSlice& box, const Tensor& out) { read_box(name, box, out); });
  if (!local.device().is_cpu()) local.copy_from(host);
}

void CheckpointReader::read_box(std::string_view name, const TensorSlice& box, const Tensor& out) {
  const IndexedTensor& stored = tensor(name);
  MT_CHECK(out.device().is_cpu() && out.dtype() == DType::f32 && out.shape() == box.shape,
           "checkpoint read of '", name, "': out must be host f32", shape_string(box.shape),
           ", got ", out.describe());
  MT_CHECK(box_inside(box, stored.shape), "checkpoint read of '", name, "': box at ",
           shape_string(box.offset), " of shape ", shape_string(box.shape), " leaves the tensor's ",
           shape_string(stored.shape));
  for (const StoredSlice& slice : stored.slices) {
    const TensorSlice part = intersect(box, slice.box);
    if (box_empty(part)) continue;
    ShardReader& reader = shard(name, slice.file);
    if (part == box) {
      reader.read(name, slice, part, out.data<float>());
      continue;
    }
    const Tensor values = Tensor::empty(part.shape);
    reader.read(name, slice, part, values.data<float>());
    Shape at = part.offset;
    for (size_t d = 0; d < at.size(); ++d) at[d] -= box.offset[d];
    copy_box(out, at, values, Shape(at.size(), 0), part.shape);
  }
}

uint64_t CheckpointReader::bytes_read() const {
  uint64_t total = 0;
  for (const auto& [file, reader] : shards_) total += reader->bytes_read();
  return total;
}

}  // namespace meshtrain
