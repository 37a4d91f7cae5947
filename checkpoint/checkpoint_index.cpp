#include "checkpoint/checkpoint_index.h"

#include <algorithm>
#include <numeric>

#include "checkpoint/json_fields.h"
#include "core/error.h"
#include "mesh/box_runs.h"

namespace meshtrain {

namespace {

constexpr const char* kFormat = "meshtrain.checkpoint";
constexpr int64_t kVersion = 1;

// Why the slices of a tensor do not tile its shape exactly, or nullopt when they do.
std::optional<std::string> tiling_problem(const IndexedTensor& tensor) {
  const auto& slices = tensor.slices;
  const size_t rank = tensor.shape.size();
  int64_t volume = 0;
  for (size_t i = 0; i < slices.size(); ++i) {
    const TensorSlice& box = slices[i].box;
    bool inside = box.offset.size() == rank && box.shape.size() == rank;
    for (size_t d = 0; inside && d < rank; ++d)
      inside = box.offset[d] >= 0 && box.shape[d] >= 0 &&
               box.offset[d] + box.shape[d] <= tensor.shape[d];
    if (!inside)
      return detail::concat("slice '", slices[i].key, "' at offset ", shape_string(box.offset),
                            " of shape ", shape_string(box.shape), " leaves the tensor's ",
                            shape_string(tensor.shape));
    volume += shape_numel(box.shape);
  }
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

IndexedTensors tensors_from_json(const JsonFields& fields, const nlohmann::json& json) {
  IndexedTensors out;
  for (const auto& [name, info] : json.items()) {
    const std::string where = "tensor '" + name + "': ";
    IndexedTensor tensor;
    tensor.shape = fields.shape_field(info, "shape", where);
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
  index.step = static_cast<int64_t>(fields.unsigned_field(json, "step"));
  index.world = static_cast<int>(fields.unsigned_field(json, "world"));
  index.chunk_bytes = fields.unsigned_field(json, "chunk_bytes");
  if (index.chunk_bytes == 0) fields.fail("", "'chunk_bytes' must be positive");
  index.metadata = fields.field(json, "metadata");
  for (const auto& [name, info] : fields.object_field(json, "files").items())
    index.files[name] = fields.unsigned_field(info, "bytes", "file '" + name + "': ");
  index.tensors = tensors_from_json(fields, fields.object_field(json, "tensors"));
  for (const auto& [name, tensor] : index.tensors) {
    const std::string where = "tensor '" + name + "': ";
    for (const StoredSlice& s : tensor.slices) {
      if (!index.files.contains(s.file))
        fields.fail(where, "slice '" + s.key + "' is in '" + s.file + "', which 'files' lacks");
      if (s.crc32.size() != chunk_count(s.box, index.chunk_bytes))
        fields.fail(where, detail::concat("slice '", s.key, "' has ", s.crc32.size(), " CRCs for ",
                                          chunk_count(s.box, index.chunk_bytes), " chunks"));
    }
    if (const auto problem = tiling_problem(tensor))
      fields.fail(where, "its slices do not tile it: " + *problem);
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
