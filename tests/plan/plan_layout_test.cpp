// The planner's view of a layout: read from a run's config through the strategies the run binds,
// its FSDP shard group the one FsdpStrategy shards over, its workload; shape-only groups that
// move nothing and give one rank its mesh alone.
#include "meshtrain/plan/plan_layout.h"

#include <gtest/gtest.h>

#include "meshtrain/core/error.h"
#include "meshtrain/mesh/axis_names.h"
#include "meshtrain/mesh/device_mesh.h"
#include "meshtrain/plan/shape_communicator.h"
#include "meshtrain/plugins/fsdp/fsdp_strategy.h"
#include "tests/support/ddp_plugin.h"
#include "tests/support/training_runs.h"

namespace meshtrain::testing {
namespace {

TEST(PlanLayout, ReadsTheRunsStrategiesAndTheirDefaults) {
  TrainConfig c = uneven_config();
  c.world = 8;
  c.mesh = parse_mesh_spec("pp=2,dp_shard=2,tp=2");
  c.set("fsdp", "param_dtype", "bf16").set("pp", "schedule", "interleaved");
  c.set("tp", "sequence_parallel", "true");
  const PlanLayout layout = plan_layout(c);
  EXPECT_EQ(layout.mesh, c.mesh);
  EXPECT_EQ(layout.fsdp.mode, FsdpMode::full);
  EXPECT_EQ(layout.fsdp.param_dtype, DType::bf16);
  EXPECT_EQ(layout.fsdp.prefetch, FsdpOptions{}.prefetch);
  EXPECT_TRUE(layout.tp.sequence_parallel);
  EXPECT_EQ(layout.pp.virtual_stages, 2) << "interleaved defaults to two stages per rank";
  EXPECT_TRUE(layout.pipelined() && layout.tensor_parallel() && layout.data_parallel());
  EXPECT_EQ(layout.fsdp_axes(), std::vector<std::string>{"dp_shard"});
  EXPECT_EQ(layout.to_string(), "pp=2,dp_shard=2,tp=2 fsdp=full param_dtype=bf16 schedule=interleaved virtual=2 sp");

  TrainConfig plain = uneven_config();
  plain.world = 8;  // the default mesh: dp_shard over the world
  EXPECT_EQ(plan_layout(plain).mesh.to_string(), "dp_shard=8");

  c.ac = {.mode = AcMode::selective, .every = 3};  // the engine's, part of the layout
  c.batch = 12;
  c.seq = 7;
  c.grad_accum = 3;
  EXPECT_EQ(plan_layout(c).ac, c.ac);
  EXPECT_EQ(plan_layout(c).to_string(),
            "pp=2,dp_shard=2,tp=2 fsdp=full param_dtype=bf16 schedule=interleaved virtual=2 sp "
            "ac=selective ac_every=3");
  const Workload w = plan_workload(c);
  EXPECT_EQ(w.micro_batch_rows(plan_layout(c)), 2);  // 12 sequences / 2 data ranks / 3
  EXPECT_THROW((Workload{.batch = 12, .seq = 7, .micro_batches = 4}.check(plan_layout(c))),
               InvalidArgument);
}

TEST(PlanLayout, RefusesPluginsItDoesNotKnow) {
  TrainConfig c = uneven_config();
  c.world = 4;
  c.mesh = parse_mesh_spec("dp_replicate=2,dp_shard=2");
  c.plugins = plugins_with_ddp();
  c.axis_plugins = {{"dp_replicate", "ddp"}};
  EXPECT_THROW(plan_layout(c), InvalidArgument);
}

// The shard group, written once for the planner, against the share FsdpStrategy itself reports
// for every mode and data mesh.
TEST(PlanLayout, ShardsOverTheGroupFsdpShardsOver) {
  for (const char* spec : {"dp_shard=4", "dp_replicate=4", "dp_replicate=2,dp_shard=2",
                           "pp=2,dp_replicate=3,dp_shard=2,tp=2", "dp_shard=1", "tp=2"}) {
    for (const FsdpMode mode :
         {FsdpMode::full, FsdpMode::grad_op, FsdpMode::none, FsdpMode::hybrid}) {
      PlanLayout layout{.mesh = parse_mesh_spec(spec)};
      layout.fsdp.mode = mode;
      const bool both = layout.mesh.has_axis(mesh_axis::dp_shard) &&
                        layout.mesh.has_axis(mesh_axis::dp_replicate);
      if (mode == FsdpMode::hybrid && !both && layout.data_parallel()) {
        EXPECT_THROW(layout.fsdp_shard_axis(), InvalidArgument) << spec;
        continue;
      }
      const double share = layout.data_parallel()
                               ? FsdpStrategy(layout.fsdp)
                                     .model_state_share(layout.mesh, layout.fsdp_axes())
                                     .fraction
                               : 1.0;
      EXPECT_EQ(layout.fsdp_shard_size(), static_cast<int>(1.0 / share + 0.5))
          << spec << " mode " << fsdp_mode_name(mode);
    }
  }
}

TEST(ShapeCommunicator, HasSizesAndRanksAndMovesNothing) {
  ShapeCommunicator tp(4, 3, "tp");
  EXPECT_EQ(tp.size(), 4);
  EXPECT_EQ(tp.rank(), 3);
  // Shape-only buffers: checked and counted as on any group, complete at once.
  const Tensor in = Tensor::empty({2, 3}, DType::bf16, Device::meta());
  const Tensor out = Tensor::empty({8, 3}, DType::bf16, Device::meta());
  EXPECT_TRUE(tp.all_gather_into(out, in)->is_completed());
  EXPECT_EQ(tp.counters().sent(CommOp::all_gather), 3u * in.nbytes());
  EXPECT_THROW(tp.all_gather_into(in, in), InvalidArgument);  // out must hold 4 x in
  EXPECT_TRUE(tp.all_reduce(out, ReduceOp::sum)->is_completed());
  EXPECT_EQ(tp.batch_p2p({{P2POp::send, in, 0}, {P2POp::recv, in, 2}}).size(), 2u);
  // A buffer with storage, or a new group, would need data to move.
  const Tensor t = Tensor::zeros({4}, DType::f32, Device::cpu());
  EXPECT_THROW(tp.all_reduce(t, ReduceOp::sum), NotSupported);
  EXPECT_THROW(tp.split(0, 0, "half"), NotSupported);
  EXPECT_THROW(ShapeCommunicator(2, 2, "tp"), InvalidArgument);
}

// A mesh over a shape-only world, built by one rank alone, has the groups a real mesh has there.
TEST(ShapeCommunicator, GivesOneRankItsMeshGroupsAlone) {
  const MeshLayout layout = parse_mesh_spec("pp=2,dp_replicate=2,dp_shard=2,tp=2");
  ShapeCommunicator world(layout.size(), 13, "world");
  DeviceMesh mesh(world, layout);
  for (const std::string axis : {"pp", "dp_replicate", "dp_shard", "tp", "dp"}) {
    const Communicator& group = mesh.comm(axis);
    EXPECT_EQ(group.world_ranks(), mesh.axis_group(axis)) << axis;
    EXPECT_EQ(group.rank(), mesh.axis_rank(axis)) << axis;
  }
  EXPECT_EQ(mesh.comm("dp").size(), 4);
  EXPECT_EQ(mesh.comm("tp").world_ranks(), (std::vector<int>{12, 13}));
}

}  // namespace
}  // namespace meshtrain::testing
