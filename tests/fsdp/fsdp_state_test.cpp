// FSDP's explicit state: sharded parameters refuse to be read, units move through their states,
// frozen parameters take no gradient, no optimizer state and no reduction, tied parameters must
// share a unit, and the full model can be exported one unit at a time.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "meshtrain/core/comm/local/spawn_ranks.h"
#include "meshtrain/mesh/device_mesh.h"
#include "meshtrain/models/adamw.h"
#include "meshtrain/models/gpt2.h"
#include "meshtrain/parallel/global_parameters.h"
#include "meshtrain/parallel/parallel_plan.h"
#include "meshtrain/plugins/builtin_strategies.h"
#include "meshtrain/plugins/fsdp/fsdp_strategy.h"
#include "tests/support/error_message.h"
#include "tests/support/training_runs.h"

namespace meshtrain::testing {
namespace {

using ::testing::HasSubstr;

const GPT2Config kModel{64, 16, 32, 2, 4};

// Builds GPT-2 with FSDP on dp_shard = world through the C++ API and runs `body` on every rank.
void with_fsdp(int world, FsdpOptions options,
               const std::function<void(GPT2&, FsdpStrategy&, ParallelModel&)>& body,
               const std::function<void(GPT2&)>& before_sharding = {}) {
  spawn_ranks(world, [&](RankContext& ctx) {
    DeviceMesh mesh(ctx.world, {{"dp_shard", world}});
    GPT2 model(kModel);
    if (before_sharding) before_sharding(model);
    auto fsdp = std::make_unique<FsdpStrategy>(options);
    FsdpStrategy& handle = *fsdp;
    ParallelPlan plan;
    plan.add(std::move(fsdp), {"dp_shard"});
    ParallelModel pm = plan.apply(mesh, model);
    body(model, handle, pm);
  });
}

MicroBatch batch_of(int64_t rows, int world) {
  std::vector<int32_t> tokens(static_cast<size_t>(rows * 8));
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(i * 5 % 64);
  MicroBatch mb;
  mb.tokens = Tensor::from_vector(tokens, {rows, 8});
  mb.targets = Tensor::from_vector(tokens, {rows, 8});
  mb.loss_scale = 1.f / static_cast<float>(rows * 8 * world);
  return mb;
}

void train_step(ParallelModel& pm, int world) {
  MicroBatch mb = batch_of(2, world);
  pm.engine->begin_micro_batch(0, 1);
  pm.engine->forward(mb);
  pm.engine->backward(mb);
  pm.engine->finish_backward();
}

TEST(FsdpState, ReadingAShardedParameterNamesItAndItsUnit) {
  with_fsdp(2, {}, [](GPT2& model, FsdpStrategy&, ParallelModel&) {
    try {
      model.parameter("h.1.mlp.c_fc.weight").value();
      FAIL() << "a sharded parameter was readable";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("h.1.mlp.c_fc.weight"), std::string::npos) << what;
      EXPECT_NE(what.find("unit 'h.1' is sharded"), std::string::npos) << what;
    }
  });
}

TEST(FsdpState, UnitsMoveThroughTheirStates) {
  with_fsdp(2, {}, [](GPT2&, FsdpStrategy& fsdp, ParallelModel& pm) {
    const auto& units = fsdp.runtime().units();
    ASSERT_EQ(units.size(), 3u);  // root, h.0, h.1
    for (const auto& u : units) EXPECT_EQ(u->state(), ShardState::sharded) << u->name();
    MicroBatch mb = batch_of(2, 2);
    pm.engine->begin_micro_batch(0, 1);
    pm.engine->forward(mb);
    EXPECT_EQ(units[0]->state(), ShardState::unsharded) << "the root stays unsharded";
    EXPECT_EQ(units[1]->state(), ShardState::sharded_after_forward);
    EXPECT_EQ(units[2]->state(), ShardState::sharded_after_forward);
    pm.engine->backward(mb);
    pm.engine->finish_backward();
    for (const auto& u : units) {
      EXPECT_EQ(u->state(), ShardState::sharded) << u->name();
      EXPECT_EQ(u->phase(), TrainingPhase::idle) << u->name();
      EXPECT_FALSE(u->reduction_pending()) << u->name();
    }
  });
}

TEST(FsdpState, GradOpKeepsBlocksUnshardedUntilBackward) {
  FsdpOptions options;
  options.mode = FsdpMode::grad_op;
  with_fsdp(2, options, [](GPT2&, FsdpStrategy& fsdp, ParallelModel& pm) {
    MicroBatch mb = batch_of(2, 2);
    pm.engine->begin_micro_batch(0, 1);
    pm.engine->forward(mb);
    for (const auto& u : fsdp.runtime().units()) EXPECT_EQ(u->state(), ShardState::unsharded);
  });
}

TEST(FsdpState, FrozenParametersTakeNoGradientStateOrReduction) {
  const std::vector<std::string> frozen = {"wpe.weight", "h.0.attn.c_attn.weight"};
  with_fsdp(
      2, {},
      [&](GPT2& model, FsdpStrategy& fsdp, ParallelModel& pm) {
        std::map<std::string, std::vector<float>> before;
        for (const OptimizerSlot& slot : pm.state->held_slots())
          before[slot.name] = slot.param.to_vector();
        const uint64_t rs_before = fsdp.counters().sent(CommOp::reduce_scatter);
        train_step(pm, 2);
        const uint64_t rs_bytes = fsdp.counters().sent(CommOp::reduce_scatter) - rs_before;
        // Trainable elements per rank: everything but the frozen ones (all dims divide by 2).
        const int64_t frozen_numel = kModel.ctx * kModel.dim + kModel.dim * 3 * kModel.dim;
        EXPECT_EQ(rs_bytes, 4u * (model.config().num_parameters() - frozen_numel) / 2);
        std::vector<OptimizerSlot> slots = pm.state->optimizer_slots();
        for (const OptimizerSlot& s : slots)
          for (const std::string& name : frozen) EXPECT_NE(s.name, name);
        AdamW optimizer;
        optimizer.step(slots, 0.1f);
        for (const OptimizerSlot& slot : pm.state->held_slots()) {
          const bool is_frozen =
              std::find(frozen.begin(), frozen.end(), slot.name) != frozen.end();
          EXPECT_EQ(slot.grad.defined(), !is_frozen) << slot.name;
          if (is_frozen) {
            EXPECT_EQ(slot.param.to_vector(), before[slot.name]) << slot.name;
          } else if (slot.name == "h.0.mlp.c_fc.weight") {
            EXPECT_NE(slot.param.to_vector(), before[slot.name]);
          }
        }
      },
      [&](GPT2& model) {
        for (const std::string& name : frozen) model.parameter(name).set_requires_grad(false);
      });
}

TEST(FsdpState, TiedParametersMustShareAUnit) {
  FsdpOptions options;
  options.unit_policy = [](Model& model) {
    std::vector<UnitSpec> units = model.default_units();
    const int head = units[0].layers.back();
    units[0].layers.pop_back();
    units.push_back({"head", {head}});  // wte would be needed in two units
    return units;
  };
  EXPECT_THROW(
      {
        try {
          with_fsdp(1, options, [](GPT2&, FsdpStrategy&, ParallelModel&) {});
        } catch (const InvalidArgument& e) {
          const std::string what = e.what();
          EXPECT_NE(what.find("'wte.weight'"), std::string::npos) << what;
          EXPECT_NE(what.find("layer 'embedding' in unit 'root'"), std::string::npos) << what;
          EXPECT_NE(what.find("layer 'head' in unit 'head'"), std::string::npos) << what;
          throw;
        }
      },
      InvalidArgument);
}

TEST(FsdpState, OptionsThatContradictTheModeAreRefused) {
  const StrategyRegistry registry = builtin_strategies();
  const auto refusal = [&](const TextOptions& options) {
    return error_message<InvalidArgument>([&] { registry.create("fsdp", options); });
  };
  EXPECT_THAT(refusal({{"mode", "grad_op"}, {"reshard_after_forward", "true"}}),
              HasSubstr("fsdp reshard_after_forward=true needs mode full or hybrid: mode grad_op "
                        "keeps the parameters unsharded after forward"));
  EXPECT_THAT(refusal({{"mode", "none"}, {"reshard_after_forward", "true"}}),
              HasSubstr("mode none never shards the parameters"));
  EXPECT_THAT(refusal({{"param_dtype", "i32"}}),
              HasSubstr("fsdp option param_dtype (--param-dtype) expects one of f32 or bf16, "
                        "got 'i32'"));
  EXPECT_THAT(refusal({{"reduce_dtype", "fp16"}}),
              HasSubstr("fsdp option reduce_dtype (--reduce-dtype) expects one of f32 or bf16, "
                        "got 'fp16'"));
}

TEST(FsdpState, UnitPolicyGroupsBlocks) {
  FsdpOptions options;
  options.unit_policy = group_units_policy(2);
  with_fsdp(2, options, [](GPT2&, FsdpStrategy& fsdp, ParallelModel& pm) {
    const auto& units = fsdp.runtime().units();
    ASSERT_EQ(units.size(), 2u);
    EXPECT_EQ(units[1]->name(), "h.0+h.1");
    train_step(pm, 2);
  });
}

// Export gathers to rank 0 alone: every other rank sends each slice it owns once, straight from
// its fp32 master shard (whatever the compute dtype), so nothing is all-gathered and no unit is
// unsharded; rank 0 assembles one global parameter at a time.
TEST(FsdpState, ExportSendsEachMasterShardToRankZeroOnly) {
  for (const DType compute : {DType::f32, DType::bf16}) {
    GPT2 reference(kModel);  // same seed: the values the export must reproduce; read-only
    spawn_ranks(2, [&](RankContext& ctx) {
      DeviceMesh mesh(ctx.world, {{"dp_shard", 2}});
      GPT2 model(kModel);
      FsdpOptions options;
      options.param_dtype = compute;
      ParallelPlan plan;
      plan.add(std::make_unique<FsdpStrategy>(options), {"dp_shard"});
      ParallelModel pm = plan.apply(mesh, model);
      MicroBatch mb = batch_of(2, 2);
      pm.engine->begin_micro_batch(0, 1);
      pm.engine->forward(mb);  // the root now holds compute-dtype values
      ctx.memory.reset_peaks();
      const uint64_t sent_before = ctx.world.counters().sent(CommOp::send);
      size_t visited = 0;
      gather_parameters(*pm.state, mesh, model, [&](const Parameter& p, const Tensor& v) {
        EXPECT_EQ(v.dtype(), DType::f32);
        EXPECT_EQ(v.to_vector(), reference.parameter(p.name()).value().to_vector()) << p.name();
        ++visited;
      });
      EXPECT_EQ(visited, ctx.rank == 0 ? model.parameters().size() : 0u);
      int64_t held = 0;
      for (const OptimizerSlot& slot : pm.state->held_slots()) held += slot.param.numel();
      EXPECT_EQ(ctx.world.counters().sent(CommOp::send) - sent_before,
                ctx.rank == 0 ? 0u : static_cast<uint64_t>(4 * held));
      const MemoryStats mem = ctx.memory.stats(DeviceKind::cpu);
      for (const MemoryCategory c : {MemoryCategory::unsharded_param, MemoryCategory::comm})
        EXPECT_EQ(mem[c].peak, mem[c].current) << "export allocated " << memory_category_name(c);
    });
  }
}

}  // namespace
}  // namespace meshtrain::testing
