// Model-state predictions on their own, against closed forms: ZeRO-3's 16 Ψ / Nd and DP's 16 Ψ
// where every dim 0 divides, GPT-2's FSDP units (gpt2_units) where none does, the stages of a
// pipeline, and the full-parameter buffers of each FSDP mode.
#include "meshtrain/plan/model_state.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "meshtrain/core/error.h"
#include "meshtrain/models/gpt2_family.h"
#include "meshtrain/models/llama_family.h"
#include "meshtrain/plan/zero_formulas.h"
#include "tests/support/training_runs.h"

namespace meshtrain::testing {
namespace {

PlanLayout layout_of(const std::string& mesh, FsdpMode mode = FsdpMode::full,
                     DType param_dtype = DType::f32) {
  PlanLayout layout{.mesh = parse_mesh_spec(mesh)};
  layout.fsdp.mode = mode;
  layout.fsdp.param_dtype = param_dtype;
  return layout;
}

// d = 32, V = 64, T = 16: every dim 0 divides by 4.
TEST(ModelStatePrediction, IsZerosClosedFormWhereRowsDivide) {
  const ModelSpecPtr model = gpt2_model(GPT2Config{64, 16, 32, 2, 4});
  const double psi = static_cast<double>(model->num_parameters());
  const ModelStatePrediction zero3 = model_state_bytes(*model, layout_of("dp_shard=4"));
  const ModelStatePrediction ddp =
      model_state_bytes(*model, layout_of("dp_shard=4", FsdpMode::none));
  ASSERT_EQ(zero3.ranks.size(), 4u);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(zero3.ranks[r].bytes.sharded_state(),
              zero_model_state_bytes(ZeroStage::os_g_p, psi, 4));
    EXPECT_EQ(ddp.ranks[r].bytes.sharded_state(), zero_model_state_bytes(ZeroStage::dp, psi, 4));
    EXPECT_EQ(zero3.ranks[r].shard_rank, r);
  }
}

// V = 67, T = 13 over 3 ranks: 23, 23, 21 and 5, 5, 3 rows. Every rank holds the padded shards;
// the optimizer holds only real elements, so the first rank holds the most.
TEST(ModelStatePrediction, PadsShardsButNotTheOptimizer) {
  const GPT2Config m = uneven_model();
  const ModelStatePrediction p = model_state_bytes(*gpt2_model(m), layout_of("dp_shard=3"));
  int64_t padded = 0, full = 0;
  for (const UnitSizes& u : gpt2_units(m, 3)) {
    padded += u.padded;
    full += u.full;
  }
  const int64_t d = m.dim;
  const int64_t rank2 = padded - (23 - 21) * d - (5 - 3) * d;
  for (const RankModelState& r : p.ranks) {
    EXPECT_EQ(r.bytes.parameters, 4u * padded);
    EXPECT_EQ(r.bytes.gradients, 4u * padded);
  }
  EXPECT_EQ(p.ranks[0].bytes.optimizer, 8u * padded);
  EXPECT_EQ(p.ranks[2].bytes.optimizer, 8u * rank2);
  EXPECT_EQ(p.ranks[0].bytes.optimizer + p.ranks[1].bytes.optimizer + p.ranks[2].bytes.optimizer,
            8u * full)
      << "the moments cover every element once";
  EXPECT_EQ(p.largest().rank, 0);
  EXPECT_EQ(p.max_sharded_state(), 16u * padded);
}

// Full parameters alive at once: the root (kept from forward to backward) and one block under
// full; every unit under grad_op; none for a group of one in f32 (views of the shards).
TEST(ModelStatePrediction, UnshardedUnitsFollowTheMode) {
  const GPT2Config m = uneven_model();
  const ModelSpecPtr model = gpt2_model(m);
  const std::vector<UnitSizes> units = gpt2_units(m, 4);
  int64_t all = 0, largest_block = 0;
  for (size_t u = 0; u < units.size(); ++u) {
    all += units[u].full;
    if (u > 0) largest_block = std::max(largest_block, units[u].full);
  }
  const int64_t root_and_block = units[0].full + largest_block;
  const auto buffers = [&](const PlanLayout& l) {
    return model_state_bytes(*model, l).max_unsharded_unit_buffers();
  };
  EXPECT_EQ(buffers(layout_of("dp_shard=4")), 4u * root_and_block);
  EXPECT_EQ(buffers(layout_of("dp_shard=4", FsdpMode::full, DType::bf16)), 2u * root_and_block);
  EXPECT_EQ(buffers(layout_of("dp_shard=4", FsdpMode::grad_op)), 4u * all);
  EXPECT_EQ(buffers(layout_of("dp_shard=4", FsdpMode::none)), 0u);
  EXPECT_EQ(buffers(layout_of("dp_shard=4", FsdpMode::none, DType::bf16)), 2u * all)
      << "replicated, but cast for compute: every unit from forward to backward";
  PlanLayout prefetch_off = layout_of("dp_shard=4");
  prefetch_off.fsdp.prefetch = 0;
  EXPECT_EQ(buffers(prefetch_off), 4u * root_and_block) << "prefetching gathers into comm buffers";
  PlanLayout reshard_root = layout_of("dp_shard=4");
  reshard_root.fsdp.reshard_root_after_forward = true;
  EXPECT_EQ(buffers(reshard_root), 4u * root_and_block) << "the root spans forward and backward";
  // Under a pipeline every unit of a rank is gathered from its first forward to its last
  // backward.
  EXPECT_EQ(buffers(layout_of("pp=1,dp_shard=4")), 4u * all);
}

// Each pp rank holds its stages' parameters; GPT-2's tied wte sits on the first and last stage.
TEST(ModelStatePrediction, NamesTheStagesOfEachRank) {
  const GPT2Config m = uneven_model();
  const ModelSpecPtr model = gpt2_model(m);
  const ModelStatePrediction p = model_state_bytes(*model, layout_of("pp=2,dp_shard=2"));
  ASSERT_EQ(p.ranks.size(), 4u);
  EXPECT_EQ(p.ranks[0].stages, std::vector<int>{0});
  EXPECT_EQ(p.ranks[3].stages, std::vector<int>{1});
  EXPECT_EQ(p.ranks[3].pp_rank, 1);
  EXPECT_EQ(p.ranks[3].shard_rank, 1);
  for (const RankModelState& r : p.ranks)
    EXPECT_GE(r.bytes.parameters, 4u * ((m.vocab + 1) / 2) * m.dim) << "rank " << r.rank;
  EXPECT_EQ(p.largest().bytes.total(),
            std::max(p.ranks[0].bytes.total(), p.ranks[2].bytes.total()));

  PlanLayout interleaved = layout_of("pp=2");
  interleaved.pp.virtual_stages = 2;
  const ModelStatePrediction v = model_state_bytes(*model, interleaved);
  EXPECT_EQ(v.ranks[0].stages, (std::vector<int>{0, 2}));
  EXPECT_EQ(v.ranks[1].stages, (std::vector<int>{1, 3}));
  EXPECT_EQ(v.ranks[1].where(), "rank 1 (pp rank 1: stages 1 and 3, tp rank 0, shard rank 0)");
  EXPECT_EQ(p.ranks[3].where(), "rank 3 (pp rank 1: stage 1, tp rank 0, shard rank 1)");
}

// Llama 3 70B on 4096 ranks: no tensor is allocated, and every element has its moments on exactly
// one rank of each data group; the TP-replicated RMSNorm gains (2 per block and the final one)
// once per tp rank.
TEST(ModelStatePrediction, PlansSeventyBillionOnFourThousandRanks) {
  const LlamaConfig m = llama_preset("llama3-70b");
  const ModelSpecPtr model = llama_model(m);
  const ModelStatePrediction p = model_state_bytes(*model, layout_of("pp=8,dp_shard=64,tp=8"));
  ASSERT_EQ(p.ranks.size(), 4096u);
  uint64_t moments = 0;
  for (const RankModelState& r : p.ranks) moments += r.bytes.optimizer;
  const uint64_t replicated = static_cast<uint64_t>((2 * m.layers + 1) * m.dim);
  EXPECT_EQ(moments, 8u * (model->num_parameters() + (8 - 1) * replicated));
  const double zero3 = zero_model_state_bytes(ZeroStage::os_g_p, model->num_parameters(), 4096);
  EXPECT_GT(p.largest().bytes.sharded_state(), zero3);
  EXPECT_LT(p.largest().bytes.sharded_state(), 1.2 * zero3) << p.largest().where();
}

TEST(ModelStatePrediction, RefusesWhatTheRunRefuses) {
  const ModelSpecPtr model = gpt2_model(uneven_model());
  EXPECT_THROW(model_state_bytes(*model, layout_of("tp=3")), InvalidArgument) << "4 heads";
  EXPECT_THROW(model_state_bytes(*model, layout_of("dp_shard=2", FsdpMode::hybrid)),
               InvalidArgument);
  PlanLayout grad_op = layout_of("dp_shard=2", FsdpMode::grad_op);
  grad_op.fsdp.reshard_after_forward = true;
  EXPECT_THROW(model_state_bytes(*model, grad_op), InvalidArgument);
}

}  // namespace
}  // namespace meshtrain::testing
