// Saves a distributed checkpoint: every rank writes only the slices of global tensors it owns to
// its own shard file, rank 0 writes one index of global names, shapes and slices, and the step is
// published atomically, so that any mesh loads it (checkpoint_reader.h). See docs/checkpoint.md.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "meshtrain/core/comm/communicator.h"
#include "meshtrain/core/tensor.h"
#include "meshtrain/mesh/layout.h"

namespace meshtrain {

// A slice of one global tensor that this rank owns and writes. A replicated tensor is given by one
// rank only (its owner); the slices of all ranks must tile each tensor exactly.
struct StoredTensor {
  std::string name;  // global name: "h.0.attn.c_attn.weight", "optimizer.exp_avg.wte.weight"
  Shape global_shape;
  Tensor local;                    // f32, host or device, shaped as the rank's local tensor
  std::vector<LocalPiece> pieces;  // where local's boxes sit in the global (Layout::local_pieces)
};

struct CheckpointSaveOptions {
  int64_t keep = 0;  // keep the newest `keep` complete checkpoints in the directory (0: keep all)
  uint64_t chunk_bytes = 1u << 20;  // CRC32 granularity: readers read and check whole chunks
  // Test hook: called on this rank after each of its files (its shard; on rank 0 also index.json
  // and COMPLETE) is written and flushed. An exception it throws leaves save_checkpoint at once,
  // with no cleanup and no further communication, as if the process had died there.
  std::function<void(const std::string& path)> after_file;
};

// Collective over `world`: writes dir/step-00000005 (8 digits) atomically and returns its path
// on every rank. Rank 0's `metadata` goes into the index. When any rank fails, every rank throws
// IoError "checkpoint save failed on rank R: <its message>", and no new step is published.
std::string save_checkpoint(Communicator& world, const std::string& dir, int64_t step,
                            const std::vector<StoredTensor>& mine, const nlohmann::json& metadata,
                            const CheckpointSaveOptions& options = {});

}  // namespace meshtrain
