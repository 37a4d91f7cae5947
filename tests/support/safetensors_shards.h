// A model's safetensors file re-saved as transformers shards large models: the tensors split over
// several files beside a model.safetensors.index.json that maps each tensor to its file.
#pragma once

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "meshtrain/core/tensor.h"
#include "meshtrain/models/safetensors.h"

namespace meshtrain::testing {

// Writes the tensors of `file` (in their stored dtype, with its metadata) round-robin over
// `shards` files model-0000i-of-0000n.safetensors in `folder`, and the index; returns the index's
// path. Round-robin puts neighbouring tensors (one block's) in different shards.
inline std::string write_sharded(const std::string& file, const std::string& folder, int shards) {
  SafetensorsReader source(file);
  std::vector<std::vector<SafetensorsSpec>> specs(static_cast<size_t>(shards));
  nlohmann::json weight_map = nlohmann::json::object();
  const auto shard_name = [&](size_t i) {
    char name[64];
    std::snprintf(name, sizeof(name), "model-%05zu-of-%05d.safetensors", i + 1, shards);
    return std::string(name);
  };
  uint64_t total_size = 0;
  for (size_t i = 0; i < source.entries().size(); ++i) {
    const SafetensorsEntry& e = source.entries()[i];
    const size_t shard = i % specs.size();
    specs[shard].push_back({e.name, e.dtype == "BF16" ? DType::bf16 : DType::f32, e.shape});
    weight_map[e.name] = shard_name(shard);
    total_size += e.end - e.begin;
  }
  std::filesystem::create_directories(folder);
  for (size_t shard = 0; shard < specs.size(); ++shard) {
    SafetensorsWriter writer(folder + "/" + shard_name(shard), specs[shard], source.metadata());
    for (const SafetensorsSpec& spec : specs[shard]) {
      const Tensor value = Tensor::empty(spec.shape);
      source.read(spec.name, value);
      writer.write(spec.name, value);
    }
    writer.finish();
  }
  const std::string index = folder + "/model.safetensors.index.json";
  std::ofstream(index) << nlohmann::json{
      {"metadata", {{"total_size", total_size}}},
      {"weight_map",
       weight_map}}.dump(2);
  return index;
}

}  // namespace meshtrain::testing
