#include "meshtrain/models/safetensors_set.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>

#include "meshtrain/core/error.h"

namespace meshtrain {

namespace {
namespace fs = std::filesystem;

// Llama 3 405B's index is 90 KiB; the limit only keeps a wrong file from being read whole.
constexpr uint64_t kMaxIndexBytes = 64u << 20;
constexpr int kMaxIndexDepth = 16;  // {"weight_map": {name: file}} is two levels

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

// A file in the index's own folder: no folder part, so neither "../x" nor "/x" reaches outside it.
bool plain_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." &&
         name.find_first_of(std::string_view("/\0", 2)) == std::string::npos;
}

IoError index_error(const std::string& path, const std::string& why) {
  return IoError(detail::concat("safetensors index '", path, "': ", why));
}

nlohmann::json parse_index(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw IoError(detail::concat("cannot open safetensors index '", path, "'"));
  const auto bytes = static_cast<uint64_t>(in.tellg());
  if (bytes > kMaxIndexBytes)
    throw index_error(path, detail::concat(bytes, " bytes; an index is at most 64 MiB"));
  std::string text(bytes, '\0');
  in.seekg(0);
  if (!in.read(text.data(), static_cast<std::streamsize>(bytes)))
    throw index_error(path, "reading it failed");
  // Refused while parsing, before an error message could print deep nesting recursively.
  const auto limit_depth = [&](int depth, nlohmann::json::parse_event_t, const nlohmann::json&) {
    if (depth > kMaxIndexDepth)
      throw index_error(path,
                        detail::concat("JSON nested deeper than ", kMaxIndexDepth, " levels"));
    return true;
  };
  try {
    return nlohmann::json::parse(text, limit_depth);
  } catch (const nlohmann::json::exception& e) {  // a syntax error, or a number past double's
    throw index_error(path, detail::concat("not valid JSON: ", e.what()));
  }
}

// tensor name -> shard file name, each checked to be a safetensors file beside the index.
std::map<std::string, std::string> read_weight_map(const std::string& path) {
  const nlohmann::json index = parse_index(path);
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
    throw index_error(path,
                      "expected a JSON object with a \"weight_map\" object {\"tensor name\": "
                      "\"shard file name\", ...}, as transformers writes it");
  std::map<std::string, std::string> weight_map;
  for (const auto& [tensor, shard] : index["weight_map"].items()) {
    const std::string key = "weight_map[" + nlohmann::json(tensor).dump() + "]: ";
    if (!shard.is_string())
      throw index_error(path, key + "expected a shard file name, got " + shard.dump());
    const std::string name = shard.get<std::string>();
    if (!plain_file_name(name))  // quoted as JSON, so that a NUL shows
      throw index_error(path, key + nlohmann::json(name).dump() +
                                  " is not a plain file name (expected a file in the index's "
                                  "folder: not empty, '.' or '..', no '/' or NUL)");
    if (!ends_with(name, ".safetensors"))
      throw index_error(path, key + "'" + name +
                                  "' is not a .safetensors file; meshtrain reads safetensors only");
    weight_map[tensor] = name;
  }
  if (weight_map.empty()) throw index_error(path, "its weight_map names no tensors");
  return weight_map;
}
}  // namespace

SafetensorsSet::SafetensorsSet(const std::string& path) : path_(path) {
  if (ends_with(path, ".json")) {
    open_shards();
  } else {
    files_.push_back(std::make_unique<SafetensorsReader>(path));
    entries_ = files_[0]->entries();
    file_of_entry_.assign(entries_.size(), 0);
    metadata_ = files_[0]->metadata();
  }
  // Sorted by name, so that one file and its shards list the same entries in the same order.
  std::vector<size_t> order(entries_.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return entries_[a].name < entries_[b].name; });
  std::vector<SafetensorsEntry> entries;
  std::vector<size_t> file_of_entry;
  for (const size_t i : order) {
    entries.push_back(std::move(entries_[i]));
    file_of_entry.push_back(file_of_entry_[i]);
  }
  entries_ = std::move(entries);
  file_of_entry_ = std::move(file_of_entry);
}

void SafetensorsSet::open_shards() {
  const std::map<std::string, std::string> weight_map = read_weight_map(path_);
  const fs::path folder = fs::path(path_).parent_path();
  std::map<std::string, size_t> file_of_shard;  // each shard opened once
  for (const auto& [tensor, shard] : weight_map) {
    if (file_of_shard.count(shard)) continue;
    const fs::path file = folder / shard;
    std::error_code unreadable;  // a name too long, say: no file either way
    if (!fs::is_regular_file(file, unreadable))
      throw index_error(path_, "weight_map puts tensor '" + tensor + "' in '" + shard +
                                   "', but there is no file '" + file.string() + "'");
    file_of_shard[shard] = files_.size();
    files_.push_back(std::make_unique<SafetensorsReader>(file.string()));
  }
  std::map<std::string, std::string> metadata_from;  // key -> the shard that gave its value
  for (const auto& [shard, file] : file_of_shard) {
    // Each shard holds exactly the tensors the index puts in it.
    for (const SafetensorsEntry& e : files_[file]->entries()) {
      const auto named = weight_map.find(e.name);
      if (named == weight_map.end() || named->second != shard)
        throw index_error(path_, "shard '" + shard + "' holds tensor '" + e.name + "', which " +
                                     (named == weight_map.end()
                                          ? std::string("its weight_map does not name")
                                          : "its weight_map puts in '" + named->second + "'"));
      entries_.push_back(e);
      file_of_entry_.push_back(file);
    }
    for (const auto& [key, value] : files_[file]->metadata()) {
      const auto [held, added] = metadata_.emplace(key, value);
      if (!added && held->second != value)
        throw index_error(path_, "shards '" + metadata_from[key] + "' and '" + shard +
                                     "' give metadata '" + key + "' different values ('" +
                                     held->second + "' and '" + value + "')");
      metadata_from.emplace(key, shard);
    }
  }
  if (entries_.size() == weight_map.size()) return;
  // Some tensor is not in the shard named for it (each shard's tensors were all named above).
  std::set<std::string> held;
  for (const SafetensorsEntry& e : entries_) held.insert(e.name);
  for (const auto& [tensor, shard] : weight_map)
    if (!held.count(tensor))
      throw index_error(path_, "weight_map puts tensor '" + tensor + "' in '" + shard +
                                   "', which holds no such tensor");
}

const SafetensorsEntry* SafetensorsSet::find(std::string_view name) const {
  const auto it =
      std::lower_bound(entries_.begin(), entries_.end(), name,
                       [](const SafetensorsEntry& e, std::string_view n) { return e.name < n; });
  return it != entries_.end() && it->name == name ? &*it : nullptr;
}

void SafetensorsSet::read(std::string_view name, const Tensor& out, int64_t offset) {
  const SafetensorsEntry* e = find(name);
  MT_CHECK(e != nullptr, "safetensors '", path_, "' has no tensor '", name, "'");
  files_[file_of_entry_[static_cast<size_t>(e - entries_.data())]]->read(name, out, offset);
}

}  // namespace meshtrain
