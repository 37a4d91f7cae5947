#include "meshtrain/checkpoint/checkpoint_index.h"

#include <algorithm>
#include <climits>
#include <numeric>

#include "meshtrain/checkpoint/json_fields.h"
#include "meshtrain/checkpoint/shard_writer.h"
#include "meshtrain/core/error.h"
#include "meshtrain/mesh/box_runs.h"
#include "meshtrain/models/safetensors.h"

namespace meshtrain {

namespace {

constexpr const char* kFormat = "meshtrain.checkpoint";
constexpr int64_t kVersion = 1;

// Why the slices of a tensor do not tile its shape exactly, or nullopt when they do.
std::optional<std::string> tiling_problem(const IndexedTensor& tensor) {
  const auto& slices = tensor.slices;
  const size_t rank = tensor.shape.size();
  for (const StoredSlice& s : slices)
    if (!box_inside(s.box, tensor.shape))
      return detail::concat("slice '", s.key, "' at offset ", shape_string(s.box.offset),
                            " of shape ", shape_string(s.box.shape), " leaves the tensor's ",
                            shape_string(tensor.shape));
  // Overlaps: sweep in order of the first offset, comparing only boxes whose first dims meet.
  if (rank > 0) {
    std::vector<size_t> order(slices.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return slices[a].box.offset[0] < slices[b].box.offset[0];
    });
    for (size_t i = 0; i < order.size(); ++i) {
      const TensorSlice& a = slices[order[i]].box;
      for (size_t j = i + 1; j < order.size(); ++j) {
        const TensorSlice& b = slices[order[j]].box;
        if (b.offset[0] >= a.offset[0] + a.shape[0]) break;
        const TensorSlice common = intersect(a, b);
        if (!box_empty(common))
          return detail::concat("slices '", slices[order[i]].key, "' and '", slices[order[j]].key,
                                "' overlap at offset ", shape_string(common.offset));
      }
    }
  }
  // Inside the tensor and disjoint (a scalar's slices hold one element each), the volumes add up
  // without overflow.
  int64_t volume = 0;
  for (const StoredSlice& s : slices) volume += shape_numel(s.box.shape);
  if (volume != shape_numel(tensor.shape))
    return detail::concat("its slices hold ", volume, " elements, its shape ",
                          shape_string(tensor.shape), " has ", shape_numel(tensor.shape));
  return std::nullopt;
}

nlohmann::json tensors_to_json(const IndexedTensors& tensors) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [name, tensor] : tensors) {
    nlohmann::json slices = nlohmann::json::array();
    for (const StoredSlice& s : tensor.slices)
      slices.push_back({{"file", s.file},
                        {"key", s.key},
                        {"offset", s.box.offset},
                        {"shape", s.box.shape},
                        {"crc32", s.crc32}});
    out[name] = {{"shape", tensor.shape}, {"dtype", "F32"}, {"slices", std::move(slices)}};
  }
  return out;
}

// Whether a shape read from a file stays within the limit of the safetensors tensors its slices
// are stored as, so that element and byte counts computed from it cannot overflow.
bool within_element_limit(const Shape& shape) {
  const auto max = static_cast<int64_t>(kMaxFileTensorElements);
  int64_t elements = 1;
  for (const int64_t d : shape)
    if (d > max || __builtin_mul_overflow(elements, d, &elements) || elements > max) return false;
  return true;
}

// A name that opens a file inside the checkpoint folder and nowhere else.
bool plain_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." &&
         name.find_first_of(std::string_view("/\0", 2)) == std::string::npos;
}

// The unsigned integer json[key], when `json` is an object holding one there.
std::optional<uint64_t> unsigned_at(const nlohmann::json& json, const char* key) {
  if (!json.is_object()) return std::nullopt;
  const auto it = json.find(key);
  if (it == json.end() || !it->is_number_unsigned()) return std::nullopt;
  return it->get<uint64_t>();
}

// Training metadata (meshtrain/train) repeats the step and counts AdamW's steps, at most one per step:
// copies that disagree mean an edited or mixed-up checkpoint, which would resume at another data
// position or with another bias correction. Other callers' metadata need not hold these numbers.
void check_metadata_steps(const JsonFields& fields, const CheckpointIndex& index) {
  const nlohmann::json& metadata = index.metadata;
  const auto step = static_cast<uint64_t>(index.step);
  if (const auto stored = unsigned_at(metadata, "step"); stored && *stored != step)
    fields.fail("'metadata': ", detail::concat("'step' is ", *stored,
                                               ", expected the index's step ", step));
  const auto optimizer = metadata.is_object() ? metadata.find("optimizer") : metadata.end();
  if (optimizer == metadata.end()) return;
  if (const auto steps = unsigned_at(*optimizer, "steps"); steps && *steps > step)
    fields.fail("'metadata': 'optimizer': ", detail::concat("'steps' is ", *steps,
                                                            ", expected at most the index's step ",
                                                            step));
}

// What the index says of one slice of tensor `name`, checked against the rest of the index.
void check_slice(const JsonFields& fields, const CheckpointIndex& index, const std::string& name,
                 size_t i, const StoredSlice& s) {
  const std::string where = detail::concat("tensor '", name, "': slice ", i, ": ");
  // The key says which slice the shard holds; another slice's key would load its data here.
  if (const std::string key = slice_key(name, s.box); s.key != key)
    fields.fail(where, detail::concat("'key' is '", s.key, "', expected '", key,
                                      "' (the tensor's name and the slice's offset)"));
  const auto file = index.files.find(s.file);
  if (file == index.files.end())
    fields.fail(where, "'file' is '" + s.file + "', which 'files' lacks");
  const uint64_t bytes = static_cast<uint64_t>(shape_numel(s.box.shape)) * kCheckpointElementBytes;
  if (bytes > file->second)
    fields.fail(where, detail::concat("its data is ", bytes, " bytes, more than the ", file->second,
                                      " bytes 'files' gives '", s.file, "'"));
  if (const uint64_t chunks = chunk_count(s.box, index.chunk_bytes); s.crc32.size() != chunks)
    fields.fail(where, detail::concat("'crc32' lists ", s.crc32.size(), " CRCs, expected one per ",
                                      index.chunk_bytes, " bytes of its data: ", chunks));
}

IndexedTensors tensors_from_json(const JsonFields& fields, const nlohmann::json& json) {
  IndexedTensors out;
  for (const auto& [name, info] : json.items()) {
    const std::string where = "tensor '" + name + "': ";
    IndexedTensor tensor;
    tensor.shape = fields.shape_field(info, "shape", where);
    if (!within_element_limit(tensor.shape))
      fields.fail(where, "shape " + shape_string(tensor.shape) +
                             " holds more than 2^48 elements, or a dim past 2^48");
    if (const std::string dtype = fields.string_field(info, "dtype", where); dtype != "F32")
      fields.fail(where, "dtype must be F32, got '" + dtype + "'");
    const nlohmann::json& slices = fields.field(info, "slices", where);
    if (!slices.is_array()) fields.fail(where, "'slices' must be an array");
    for (size_t i = 0; i < slices.size(); ++i) {
      const std::string at = detail::concat(where, "slice ", i, ": ");
      StoredSlice s;
      s.file = fields.string_field(slices[i], "file", at);
      s.key = fields.string_field(slices[i], "key", at);
      s.box.offset = fields.shape_field(slices[i], "offset", at);
      s.box.shape = fields.shape_field(slices[i], "shape", at);
      const nlohmann::json& crcs = fields.field(slices[i], "crc32", at);
      if (!crcs.is_array()) fields.fail(at, "'crc32' must be an array");
      for (const auto& c : crcs) {
        if (!c.is_number_unsigned() || c.get<uint64_t>() > 0xffffffffu)
          fields.fail(at, "'crc32' must hold 32-bit unsigned integers, got " + c.dump());
        s.crc32.push_back(c.get<uint32_t>());
      }
      tensor.slices.push_back(std::move(s));
    }
    out.emplace(name, std::move(tensor));
  }
  return out;
}

}  // namespace

uint64_t chunk_count(const TensorSlice& box, uint64_t chunk_bytes) {
  const uint64_t bytes = static_cast<uint64_t>(shape_numel(box.shape)) * kCheckpointElementBytes;
  return (bytes + chunk_bytes - 1) / chunk_bytes;
}

bool box_inside(const TensorSlice& box, const Shape& shape) {
  if (box.offset.size() != shape.size() || box.shape.size() != shape.size()) return false;
  for (size_t d = 0; d < shape.size(); ++d)
    if (box.offset[d] < 0 || box.shape[d] < 0 || box.offset[d] > shape[d] ||
        box.shape[d] > shape[d] - box.offset[d])
      return false;
  return true;
}

CheckpointIndex build_index(int64_t step, uint64_t chunk_bytes, const nlohmann::json& metadata,
                            const std::vector<ShardContents>& shards) {
  CheckpointIndex index;
  index.step = step;
  index.world = static_cast<int>(shards.size());
  index.chunk_bytes = chunk_bytes;
  index.metadata = metadata;
  for (const ShardContents& shard : shards) {
    index.files[shard.file] = shard.bytes;
    for (const auto& [name, tensor] : shard.tensors) {
      auto [it, added] = index.tensors.try_emplace(name, IndexedTensor{tensor.shape, {}});
      MT_CHECK(it->second.shape == tensor.shape, "checkpoint tensor '", name, "' has shape ",
               shape_string(it->second.shape), " on one rank and ", shape_string(tensor.shape),
               " in '", shard.file, "'");
      it->second.slices.insert(it->second.slices.end(), tensor.slices.begin(), tensor.slices.end());
    }
  }
  for (const auto& [name, tensor] : index.tensors)
    if (const auto problem = tiling_problem(tensor))
      throw InvalidArgument(detail::concat("checkpoint tensor '", name,
                                           "': the ranks' slices do not tile it: ", *problem,
                                           " (a replicated tensor must be stored by one rank)"));
  return index;
}

nlohmann::json index_to_json(const CheckpointIndex& index) {
  nlohmann::json files = nlohmann::json::object();
  for (const auto& [name, bytes] : index.files) files[name] = {{"bytes", bytes}};
  return {{"format", kFormat},
          {"version", kVersion},
          {"step", index.step},
          {"world", index.world},
          {"chunk_bytes", index.chunk_bytes},
          {"metadata", index.metadata},
          {"files", std::move(files)},
          {"tensors", tensors_to_json(index.tensors)}};
}

CheckpointIndex index_from_json(const nlohmann::json& json, const std::string& path) {
  const JsonFields fields("checkpoint index '" + path + "'");
  if (!json.is_object() || json.value("format", nlohmann::json()) != kFormat)
    fields.fail("", detail::concat("not a meshtrain checkpoint index (expected \"format\": \"",
                                   kFormat, "\")"));
  if (const uint64_t version = fields.unsigned_field(json, "version"); version != kVersion)
    fields.fail("", detail::concat("version ", version, ", this build reads version ", kVersion));
  CheckpointIndex index;
  index.step = static_cast<int64_t>(fields.bounded_field(json, "step", INT64_MAX));
  const uint64_t world = fields.bounded_field(json, "world", INT_MAX);
  index.chunk_bytes = fields.bounded_field(json, "chunk_bytes", kMaxCheckpointChunkBytes);
  if (index.chunk_bytes == 0) fields.fail("", "'chunk_bytes' must be positive");
  index.metadata = fields.field(json, "metadata");
  check_metadata_steps(fields, index);
  for (const auto& [name, info] : fields.object_field(json, "files").items()) {
    if (!plain_file_name(name))  // quoted as JSON, so that a NUL shows
      fields.fail("", "'files': " + nlohmann::json(name).dump() +
                          " is not a plain file name (expected a file in the checkpoint folder: "
                          "not empty, '.' or '..', no '/' or NUL)");
    index.files[name] = fields.unsigned_field(info, "bytes", "file '" + name + "': ");
  }
  if (world != index.files.size())
    fields.fail("", detail::concat("'world' is ", world, " but 'files' lists ", index.files.size(),
                                   " shards (one per rank)"));
  index.world = static_cast<int>(world);
  index.tensors = tensors_from_json(fields, fields.object_field(json, "tensors"));
  for (const auto& [name, tensor] : index.tensors) {
    // The boxes first: the other checks compute with them.
    if (const auto problem = tiling_problem(tensor))
      fields.fail("tensor '" + name + "': ", "its slices do not tile it: " + *problem);
    for (size_t i = 0; i < tensor.slices.size(); ++i)
      check_slice(fields, index, name, i, tensor.slices[i]);
  }
  return index;
}

nlohmann::json shard_contents_to_json(const ShardContents& shard) {
  return {
      {"file", shard.file}, {"bytes", shard.bytes}, {"tensors", tensors_to_json(shard.tensors)}};
}

ShardContents shard_contents_from_json(const nlohmann::json& json) {
  const JsonFields fields("checkpoint shard report");
  ShardContents shard;
  shard.file = fields.string_field(json, "file");
  shard.bytes = fields.unsigned_field(json, "bytes");
  shard.tensors = tensors_from_json(fields, fields.object_field(json, "tensors"));
  return shard;
}

}  // namespace meshtrain
