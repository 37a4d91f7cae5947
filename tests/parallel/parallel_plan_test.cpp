// ParallelPlan: binding checks, validation against the mesh, the fixed order of application
// (pipeline, tensor, data) and what the strategies' edits to the context turn into.
#include "meshtrain/parallel/parallel_plan.h"

#include <mutex>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "meshtrain/core/comm/local/spawn_ranks.h"
#include "meshtrain/core/error.h"
#include "meshtrain/mesh/device_mesh.h"
#include "tests/parallel/toy_model.h"

namespace meshtrain {
namespace {

using ::testing::HasSubstr;
using testing::error_message;
using testing::gpt2_like;
using testing::ToyModel;
using testing::ZeroValues;

const ZeroValues zeros;

// Records "<name>[axis,axis]" into a log when applied, with the axis sizes it saw on the mesh.
class RecordingStrategy : public Strategy {
 public:
  RecordingStrategy(std::string name, StrategyKind kind, std::vector<std::string>* log)
      : name_(std::move(name)), kind_(kind), log_(log) {}
  std::string name() const override { return name_; }
  StrategyKind kind() const override { return kind_; }
  void apply(ParallelContext& ctx, const std::vector<std::string>& axes) override {
    std::string entry = name_ + "[";
    for (size_t i = 0; i < axes.size(); ++i)
      entry += (i ? "," : "") + axes[i] + "=" + std::to_string(ctx.mesh.axis_size(axes[i]));
    log_->push_back(entry + "]");
  }

 private:
  std::string name_;
  StrategyKind kind_;
  std::vector<std::string>* log_;
};

std::unique_ptr<Strategy> recording(std::string name, StrategyKind kind,
                                    std::vector<std::string>* log) {
  return std::make_unique<RecordingStrategy>(std::move(name), kind, log);
}

TEST(ParallelPlan, StrategyBoundTwice) {
  std::vector<std::string> log;
  ParallelPlan plan;
  plan.add(recording("fsdp", StrategyKind::data, &log), {"dp_shard"});
  const std::string msg = error_message<InvalidArgument>(
      [&] { plan.add(recording("fsdp", StrategyKind::data, &log), {"dp_replicate"}); });
  EXPECT_THAT(msg, HasSubstr("strategy 'fsdp' is bound twice"));
}

TEST(ParallelPlan, AxisBoundToTwoStrategies) {
  std::vector<std::string> log;
  ParallelPlan plan;
  plan.add(recording("fsdp", StrategyKind::data, &log), {"dp_replicate", "dp_shard"});
  const std::string msg = error_message<InvalidArgument>(
      [&] { plan.add(recording("ddp", StrategyKind::data, &log), {"dp_shard"}); });
  EXPECT_THAT(msg, HasSubstr("axis 'dp_shard'"));
  EXPECT_THAT(msg, HasSubstr("'fsdp'"));
  EXPECT_THAT(msg, HasSubstr("'ddp'"));
}

TEST(ParallelPlan, NullOrAxislessStrategy) {
  std::vector<std::string> log;
  ParallelPlan plan;
  EXPECT_THROW(plan.add(nullptr, {"dp_shard"}), InvalidArgument);
  EXPECT_THAT(error_message<InvalidArgument>(
                  [&] { plan.add(recording("tp", StrategyKind::tensor, &log), {}); }),
              HasSubstr("'tp' must be bound to at least one axis"));
}

TEST(ParallelPlan, AxisTheMeshLacksNamesTheMesh) {
  spawn_ranks(2, [](RankContext& ctx) {
    DeviceMesh mesh(ctx.world, {{"dp_shard", 2}});
    ToyModel model = gpt2_like(2);
    std::vector<std::string> log;
    ParallelPlan plan;
    plan.add(recording("fsdp", StrategyKind::data, &log), {"dp_shard"});
    plan.add(recording("tp", StrategyKind::tensor, &log), {"tp"});
    const std::string msg = error_message<InvalidArgument>([&] { plan.apply(mesh, model, &zeros); });
    EXPECT_THAT(msg, HasSubstr("strategy 'tp' is bound to axis 'tp'"));
    EXPECT_THAT(msg, HasSubstr("dp_shard=2"));
    EXPECT_TRUE(log.empty()) << "no strategy may run when the bindings are invalid";
  });
}

TEST(ParallelPlan, AppliesPipelineThenTensorThenDataRegardlessOfAddOrder) {
  spawn_ranks(8, [](RankContext& ctx) {
    DeviceMesh mesh(ctx.world, {{"pp", 2}, {"dp_replicate", 1}, {"dp_shard", 2}, {"tp", 2}});
    ToyModel model = gpt2_like(3);
    std::vector<std::string> log;
    ParallelPlan plan;
    plan.add(recording("fsdp", StrategyKind::data, &log), {"dp_replicate", "dp_shard"});
    plan.add(recording("tp", StrategyKind::tensor, &log), {"tp"});
    plan.add(recording("pp", StrategyKind::pipeline, &log), {"pp"});
    ParallelModel pm = plan.apply(mesh, model, &zeros);
    EXPECT_EQ(log, (std::vector<std::string>{"pp[pp=2]", "tp[tp=2]",
                                             "fsdp[dp_replicate=1,dp_shard=2]"}));
    EXPECT_EQ(plan.describe(), "pp[pp] tp[tp] fsdp[dp_replicate,dp_shard]");
    ASSERT_NE(pm.engine, nullptr);
    ASSERT_NE(pm.state, nullptr);
  });
}

TEST(ParallelPlan, TiesKeepAddOrder) {
  spawn_ranks(1, [](RankContext& ctx) {
    DeviceMesh mesh(ctx.world, {{"dp_replicate", 1}, {"dp_shard", 1}});
    ToyModel model = gpt2_like(1);
    std::vector<std::string> log;
    ParallelPlan plan;
    plan.add(recording("second-data", StrategyKind::data, &log), {"dp_shard"});
    plan.add(recording("first-data", StrategyKind::data, &log), {"dp_replicate"});
    plan.apply(mesh, model, &zeros);
    EXPECT_EQ(log, (std::vector<std::string>{"second-data[dp_shard=1]",
                                             "first-data[dp_replicate=1]"}));
  });
}

TEST(ParallelPlan, ApplyingTwiceIsAnError) {
  spawn_ranks(1, [](RankContext& ctx) {
    DeviceMesh mesh(ctx.world, {{"dp_shard", 1}});
    ToyModel model = gpt2_like(1);
    std::vector<std::string> log;
    ParallelPlan plan;
    plan.add(recording("fsdp", StrategyKind::data, &log), {"dp_shard"});
    plan.apply(mesh, model, &zeros);
    EXPECT_THAT(error_message<InvalidArgument>([&] { plan.apply(mesh, model, &zeros); }),
                HasSubstr("applies once"));
    EXPECT_EQ(log.size(), 1u);
  });
}

TEST(ParallelPlan, EmptyPlanGivesTheDefaultUnitsAndWholeParameters) {
  spawn_ranks(1, [](RankContext& ctx) {
    DeviceMesh mesh(ctx.world, MeshLayout());
    ToyModel model = gpt2_like(2);
    model.param(1).set_requires_grad(false);
    ParallelPlan plan;
    ParallelModel pm = plan.apply(mesh, model, &zeros);
    const UnitPlan& units = pm.engine->unit_plan();
    ASSERT_EQ(units.units.size(), 3u);
    EXPECT_EQ(units.units[0].name, "root");
    EXPECT_TRUE(pm.engine->hooks().empty());
    EXPECT_EQ(&pm.engine->model(), &model);
    // WholeParameters: every trainable parameter, whole, in model order (p1 is frozen).
    std::vector<std::string> slots;
    for (const OptimizerSlot& s : pm.state->optimizer_slots()) slots.push_back(s.name);
    EXPECT_EQ(slots, (std::vector<std::string>{"p0", "p2", "p3"}));
    // The frozen one is held (a value, no gradient) but not stepped.
    const std::vector<OptimizerSlot> held = pm.state->held_slots();
    ASSERT_EQ(held.size(), 4u);
    EXPECT_EQ(held[1].name, "p1");
    EXPECT_FALSE(held[1].grad.defined());
    EXPECT_EQ(held[1].param.to_vector(), std::vector<float>(6, 0.f));
  });
}

// A data strategy that regroups units, adds hooks and takes over the trainable state; the plan
// must hand all three to the engine it builds.
class EditingStrategy : public Strategy, public StepHooks {
 public:
  std::string name() const override { return "editing"; }
  StrategyKind kind() const override { return StrategyKind::data; }
  void apply(ParallelContext& ctx, const std::vector<std::string>&) override {
    seen_units = ctx.unit_specs.size();
    ctx.unit_specs = {{"all", {0, 1, 2, 3}}};
    ctx.hooks.push_back(this);
    ctx.state = std::make_unique<NoState>();
  }
  size_t seen_units = 0;

  struct NoState : TrainableState {
    std::vector<OptimizerSlot> optimizer_slots() override { return {}; }
    std::vector<OptimizerSlot> held_slots() override { return {}; }
    void zero_grad() override {}
  };
};

TEST(ParallelPlan, StrategyEditsReachTheEngine) {
  spawn_ranks(1, [](RankContext& ctx) {
    DeviceMesh mesh(ctx.world, {{"dp_shard", 1}});
    ToyModel model = gpt2_like(2);
    auto strategy = std::make_unique<EditingStrategy>();
    EditingStrategy* raw = strategy.get();
    ParallelPlan plan;
    plan.add(std::move(strategy), {"dp_shard"});
    ParallelModel pm = plan.apply(mesh, model, &zeros);
    EXPECT_EQ(raw->seen_units, 3u);  // the model's default units came in
    ASSERT_EQ(pm.engine->unit_plan().units.size(), 1u);
    EXPECT_EQ(pm.engine->unit_plan().units[0].name, "all");
    ASSERT_EQ(pm.engine->hooks().size(), 1u);
    EXPECT_EQ(pm.engine->hooks()[0], static_cast<StepHooks*>(raw));
    EXPECT_TRUE(pm.state->optimizer_slots().empty());
  });
}

}  // namespace
}  // namespace meshtrain
