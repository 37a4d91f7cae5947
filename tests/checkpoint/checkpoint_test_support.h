// Tensors laid out over a mesh for the checkpoint tests: global values in closed form, each rank's
// local tensor cut from them by its layout, and the saves and loads that run over spawn_ranks.
#pragma once

#include <string>
#include <vector>

#include "meshtrain/checkpoint/checkpoint_writer.h"
#include "meshtrain/mesh/layout.h"
#include "meshtrain/mesh/mesh_layout.h"

namespace meshtrain::testing {

// A global tensor and how it is laid out: its placements on every axis it may meet, of which a
// mesh keeps those on its own axes (so one description serves tp=2,dp_shard=2 and dp_shard=3).
struct TestTensor {
  std::string name;
  Shape shape;
  std::vector<AxisPlacement> placements;
  float seed = 0.0f;  // values are seed + i / 4 for element i: exact in f32, distinct per tensor
};

// GPT-2-like tensors: a blocked q|k|v on tp, row- and column-parallel ones, uneven dims,
// replicated ones (a scalar among them), an empty one and an optimizer slot.
std::vector<TestTensor> gpt2_like_tensors();

Layout layout_on(const TestTensor& t, const MeshLayout& mesh);
Tensor global_values(const TestTensor& t);
// The rank's local tensor under the layout on `mesh`, cut from the global values.
Tensor local_values(const TestTensor& t, const MeshLayout& mesh, int rank);

// What `rank` stores: its pieces of each tensor it owns, a tensor being owned by the ranks whose
// coordinate is 0 on every axis its layout does not shard (one owner per slice).
std::vector<StoredTensor> stored_by(const std::vector<TestTensor>& tensors, const MeshLayout& mesh,
                                    int rank);

CheckpointSaveOptions chunks_of(uint64_t chunk_bytes);
CheckpointSaveOptions keeping(int64_t keep);

// Saves on a mesh (spawn_ranks over its size) and returns the checkpoint's path.
std::string save_on(const std::string& mesh_spec, const std::string& dir, int64_t step,
                    const std::vector<TestTensor>& tensors,
                    const CheckpointSaveOptions& options = {});
// Loads on a mesh and expects every rank's local tensors equal, bit for bit, to the global values
// cut by the layout there. Returns the bytes each rank's reader read.
std::vector<uint64_t> expect_loads_on(const std::string& mesh_spec, const std::string& path,
                                      const std::vector<TestTensor>& tensors);

}  // namespace meshtrain::testing
