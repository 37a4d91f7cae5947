#include "tests/checkpoint/checkpoint_test_support.h"

#include <gtest/gtest.h>

#include <mutex>

#include "meshtrain/checkpoint/checkpoint_reader.h"
#include "meshtrain/core/comm/local/spawn_ranks.h"
#include "meshtrain/mesh/box_copy.h"
#include "meshtrain/mesh/box_runs.h"

namespace meshtrain::testing {

std::vector<TestTensor> gpt2_like_tensors() {
  const AxisPlacement rows{"dp_shard", Shard(0)};
  return {
      {"h.0.attn.c_attn.weight", {5, 12}, {{"tp", Shard(1, 3)}, rows}, 1000.0f},
      {"h.0.mlp.c_fc.weight", {5, 8}, {{"tp", Shard(1)}, rows}, 2000.0f},
      {"h.0.mlp.c_proj.weight", {10, 6}, {{"tp", Shard(0)}, rows}, 3000.0f},
      {"wte.weight", {11, 4}, {rows}, 4000.0f},
      {"ln_f.bias", {7}, {rows}, 5000.0f},
      {"ln_f.weight", {3, 5}, {}, 6000.0f},
      {"scale", {}, {}, 7000.0f},
      {"empty", {0, 4}, {rows}, 0.0f},
      {"optimizer.exp_avg.wte.weight", {11, 4}, {rows}, 8000.0f},
  };
}

Layout layout_on(const TestTensor& t, const MeshLayout& mesh) {
  std::vector<AxisPlacement> kept;
  for (const AxisPlacement& p : t.placements)
    if (mesh.has_axis(p.axis)) kept.push_back(p);
  return Layout(kept);
}

Tensor global_values(const TestTensor& t) {
  const Tensor out = Tensor::empty(t.shape);
  for (int64_t i = 0; i < out.numel(); ++i)
    out.data<float>()[i] = t.seed + static_cast<float>(i) / 4.0f;
  return out;
}

Tensor local_values(const TestTensor& t, const MeshLayout& mesh, int rank) {
  const Layout layout = layout_on(t, mesh);
  const Tensor global = global_values(t);
  const Tensor local = Tensor::empty(layout.local_shape(t.shape, mesh, rank));
  fill_from_boxes(local, layout.local_pieces(t.shape, mesh, rank),
                  [&](const TensorSlice& box, const Tensor& out) {
                    copy_box(out, Shape(box.shape.size(), 0), global, box.offset, box.shape);
                  });
  return local;
}

std::vector<StoredTensor> stored_by(const std::vector<TestTensor>& tensors, const MeshLayout& mesh,
                                    int rank) {
  std::vector<StoredTensor> out;
  const std::vector<int> coordinates = mesh.coordinates(rank);
  for (const TestTensor& t : tensors) {
    const Layout layout = layout_on(t, mesh);
    bool owner = true;
    for (int a = 0; a < mesh.ndim(); ++a)
      if (!layout.shards_axis(mesh.axes()[a].name) && coordinates[a] != 0) owner = false;
    if (owner)
      out.push_back(
          {t.name, t.shape, local_values(t, mesh, rank), layout.local_pieces(t.shape, mesh, rank)});
  }
  return out;
}

CheckpointSaveOptions chunks_of(uint64_t chunk_bytes) {
  CheckpointSaveOptions options;
  options.chunk_bytes = chunk_bytes;
  return options;
}

CheckpointSaveOptions keeping(int64_t keep) {
  CheckpointSaveOptions options;
  options.keep = keep;
  return options;
}

std::string save_on(const std::string& mesh_spec, const std::string& dir, int64_t step,
                    const std::vector<TestTensor>& tensors, const CheckpointSaveOptions& options) {
  const MeshLayout mesh = parse_mesh_spec(mesh_spec);
  std::string path;
  std::mutex mutex;
  spawn_ranks(mesh.size(), [&](RankContext& ctx) {
    const std::string mine = save_checkpoint(
        ctx.world, dir, step, stored_by(tensors, mesh, ctx.rank), {{"mesh", mesh_spec}}, options);
    std::lock_guard lock(mutex);
    if (ctx.rank == 0) path = mine;
  });
  return path;
}

std::vector<uint64_t> expect_loads_on(const std::string& mesh_spec, const std::string& path,
                                      const std::vector<TestTensor>& tensors) {
  const MeshLayout mesh = parse_mesh_spec(mesh_spec);
  std::vector<uint64_t> bytes(mesh.size());
  spawn_ranks(mesh.size(), [&](RankContext& ctx) {
    CheckpointReader reader(path);  // one per rank: ranks read concurrently
    for (const TestTensor& t : tensors) {
      const Layout layout = layout_on(t, mesh);
      const Tensor local = Tensor::empty(layout.local_shape(t.shape, mesh, ctx.rank));
      for (int64_t i = 0; i < local.numel(); ++i) local.data<float>()[i] = -1.0f;
      reader.read(t.name, t.shape, local, layout.local_pieces(t.shape, mesh, ctx.rank));
      EXPECT_EQ(local.to_vector(), local_values(t, mesh, ctx.rank).to_vector())
          << t.name << " at rank " << ctx.rank << " of " << mesh_spec;
    }
    bytes[ctx.rank] = reader.bytes_read();
  });
  return bytes;
}

}  // namespace meshtrain::testing
