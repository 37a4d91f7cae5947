// Memory under tensor parallelism, from the allocators' counters: each rank holds its TP pieces
// of the block weights (then its FSDP shard of those), and no rank ever allocates a [tokens, V]
// tensor: the vocab-parallel head computes [tokens, V / tp] logits.
#include <gtest/gtest.h>

#include "meshtrain/mesh/axis_names.h"
#include "meshtrain/mesh/shard_math.h"
#include "tests/support/training_runs.h"

namespace meshtrain::testing {
namespace {

// Elements of one block's parameters on a tp rank, each padded to ceil(rows / w) rows as FSDP
// shards them over w ranks (w = 1: the TP pieces whole). Column-parallel weights and biases and
// row-parallel weights are split by tp; LayerNorms and row-parallel biases are replicated.
int64_t block_elements(int64_t d, int64_t t, int64_t w) {
  const auto rows = [&](int64_t r, int64_t row_numel) { return (r + w - 1) / w * row_numel; };
  return 6 * rows(d, 1) + rows(d, 3 * d / t) + rows(3 * d / t, 1) + rows(d / t, d) +
         rows(d, 4 * d / t) + rows(4 * d / t, 1) + rows(4 * d / t, d);
}

int64_t root_elements(const GPT2Config& m, int64_t t, int tp_rank, int64_t w) {
  const auto rows = [&](int64_t r, int64_t row_numel) { return (r + w - 1) / w * row_numel; };
  return rows(shard_range(m.vocab, t, tp_rank).size, m.dim) + rows(m.ctx, m.dim) +
         2 * rows(m.dim, 1);
}

struct Case {
  const char* mesh;
  int world;
  int tp;
  int dp_shard;
};

class TpMemory : public ::testing::TestWithParam<Case> {};

TEST_P(TpMemory, ParametersAndGradientsAreTheTpPiecesOfTheShards) {
  const Case& k = GetParam();
  TrainConfig c = uneven_config();
  c.world = k.world;
  c.mesh = parse_mesh_spec(k.mesh);
  const GPT2Config m = gpt2_config(*c.model);
  with_trainers(c, [&](Trainer& trainer, MemoryTracker& memory) {
    const int tp_rank = trainer.mesh().axis_rank(mesh_axis::tp);
    const int64_t elements = root_elements(m, k.tp, tp_rank, k.dp_shard) +
                             m.layers * block_elements(m.dim, k.tp, k.dp_shard);
    const MemoryStats mem = memory.stats(DeviceKind::cpu);
    EXPECT_EQ(mem[MemoryCategory::param].current, 4u * elements);
    EXPECT_EQ(mem[MemoryCategory::grad].current, 4u * elements);
  });
}

INSTANTIATE_TEST_SUITE_P(Layouts, TpMemory,
                         ::testing::Values(Case{"tp=2", 2, 2, 1}, Case{"tp=4", 4, 4, 1},
                                           Case{"dp_shard=2,tp=2", 4, 2, 2}),
                         [](const auto& info) {
                           std::string name = info.param.mesh;
                           for (char& ch : name)
                             if (ch == '=' || ch == ',') ch = '_';
                           return name;
                         });

TEST(TpMemory, BlockWeightsDivideByTp) {
  // d = 24 divides by 2 and 4: only the replicated LayerNorms and row-parallel biases (6d) stay.
  const int64_t d = 24, whole = block_elements(d, 1, 1);
  for (int64_t t : {2, 4}) EXPECT_EQ(block_elements(d, t, 1) - 6 * d, (whole - 6 * d) / t);
}

// The largest single activation of a step: with V = 500 >> 4d the logits dominate, so the
// single-rank run allocates [tokens, V] and the tensor-parallel ones must not.
size_t largest_activation(const std::string& mesh, int world, bool sequence_parallel) {
  TrainConfig c = small_config(GPT2Config{500, 13, 24, 2, 4}, synthetic_token_file(500, 4096));
  c.steps = 1;
  c.world = world;
  if (!mesh.empty()) c.mesh = parse_mesh_spec(mesh);
  if (sequence_parallel) c.set("tp", "sequence_parallel", "true");
  std::vector<size_t> largest(world);
  with_trainers(c, [&](Trainer& trainer, MemoryTracker& memory) {
    trainer.step();
    largest[trainer.rank()] = memory.stats(DeviceKind::cpu)[MemoryCategory::activation].largest;
  });
  return *std::max_element(largest.begin(), largest.end());
}

TEST(TpMemory, NoRankHoldsTokensTimesVocab) {
  const size_t tokens = 48 * 12, full_logits = 4 * tokens * 500;
  EXPECT_GE(largest_activation("", 1, false), full_logits) << "the check must be able to fail";
  EXPECT_EQ(largest_activation("tp=2", 2, false), full_logits / 2);
  EXPECT_EQ(largest_activation("tp=4", 4, false), full_logits / 4);
  EXPECT_EQ(largest_activation("tp=4", 4, true), full_logits / 4);
}

}  // namespace
}  // namespace meshtrain::testing
