// Conversions between a checkpoint and one safetensors file, the form Hugging Face tools and
// `meshtrain` model loading read: export of the model's tensors, and import as a one-rank
// checkpoint that any mesh then loads. Both hold one tensor in memory at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace meshtrain {

// Writes every tensor of `checkpoint` (a step-N directory) whose name does not start with
// `skip_prefix` (the optimizer state by default) to `file` as F32, with the metadata
// {"format": "pt"} that Hugging Face loaders expect and `metadata` besides (what the model needs
// to load it again, such as its head count).
void checkpoint_to_safetensors(const std::string& checkpoint, const std::string& file,
                               const std::map<std::string, std::string>& metadata = {},
                               std::string_view skip_prefix = "optimizer.");

// The name a file's key is stored under in a checkpoint, or nullopt to leave that tensor out.
using KeyNames = std::function<std::optional<std::string>(std::string_view key)>;

// Writes the tensors of `file` (F32 or BF16, stored as F32; a safetensors file or a sharded index,
// as SafetensorsSet reads them) as the one-rank checkpoint dir/step-N, published atomically like
// any save, and returns its path. `stored_name` renames keys (a Hugging Face file's, say) or leaves
// tensors out; unset, every key is kept as it is.
std::string safetensors_to_checkpoint(const std::string& file, const std::string& dir, int64_t step,
                                      const nlohmann::json& metadata,
                                      const KeyNames& stored_name = {});

}  // namespace meshtrain
