#include "meshtrain/mesh/device_mesh.h"

#include <numeric>

#include <gtest/gtest.h>

#include "meshtrain/core/comm/local/spawn_ranks.h"
#include "meshtrain/core/error.h"
#include "meshtrain/mesh/layout.h"
#include "meshtrain/mesh/shard_math.h"
#include "tests/support/error_message.h"

namespace meshtrain {
namespace {

using testing::error_message;

// The sum of world ranks over the group, computed by an all-reduce on the axis communicator.
int all_reduced_rank_sum(Communicator& comm) {
  Tensor t = Tensor::from_vector(std::vector<float>{static_cast<float>(comm.world_rank())}, {1});
  comm.all_reduce(t, ReduceOp::sum)->wait();
  return static_cast<int>(t.to_vector()[0]);
}

void check_three_axes(Communicator& world) {
  DeviceMesh mesh(world, {{"pp", 2}, {"dp_shard", 2}, {"tp", 2}});
  const int r = world.rank();
  EXPECT_EQ(mesh.rank(), r);
  EXPECT_EQ(mesh.size(), 8);
  EXPECT_EQ(mesh.coordinates(), (std::vector<int>{r / 4, (r / 2) % 2, r % 2}));
  EXPECT_EQ(mesh.axis_rank("tp"), r % 2);
  EXPECT_EQ(mesh.axis_rank("pp"), r / 4);
  EXPECT_EQ(mesh.axis_group("tp"), (std::vector<int>{r - r % 2, r - r % 2 + 1}));
  EXPECT_EQ(mesh.axis_group("pp"), (std::vector<int>{r % 4, r % 4 + 4}));
  for (const char* axis : {"pp", "dp_shard", "tp"}) {
    Communicator& comm = mesh.comm(axis);
    EXPECT_EQ(comm.name(), axis);
    EXPECT_EQ(comm.size(), 2);
    EXPECT_EQ(comm.rank(), mesh.axis_rank(axis));
    EXPECT_EQ(comm.world_ranks(), mesh.axis_group(axis));
    const auto group = mesh.axis_group(axis);
    EXPECT_EQ(all_reduced_rank_sum(comm), std::accumulate(group.begin(), group.end(), 0));
  }
  // "dp" is dp_shard alone here (no dp_replicate).
  EXPECT_EQ(mesh.axis_size("dp"), 2);
  EXPECT_EQ(mesh.comm("dp").world_ranks(), mesh.axis_group("dp_shard"));
  EXPECT_FALSE(mesh.has_axis("dp_replicate"));
  EXPECT_TRUE(mesh.has_axis("dp"));

  // Flattened dp_shard x tp: the 4 neighbouring ranks of a pipeline stage.
  mesh.flatten("dp_tp", {"dp_shard", "tp"});
  EXPECT_EQ(mesh.axis_size("dp_tp"), 4);
  EXPECT_EQ(mesh.axis_rank("dp_tp"), r % 4);
  EXPECT_EQ(mesh.comm("dp_tp").size(), 4);
  EXPECT_EQ(all_reduced_rank_sum(mesh.comm("dp_tp")), 4 * (r / 4 * 4) + 6);

  // The sub-mesh of a stage shares the parent's communicators.
  const DeviceMesh stage = mesh.sub_mesh({"dp_shard", "tp"});
  EXPECT_EQ(stage.size(), 4);
  EXPECT_EQ(stage.rank(), r % 4);
  EXPECT_EQ(stage.world_rank(), r);
  EXPECT_EQ(stage.world_ranks(), mesh.axis_group("dp_tp"));
  EXPECT_EQ(stage.coordinates(), (std::vector<int>{(r / 2) % 2, r % 2}));
  EXPECT_EQ(&stage.comm("tp"), &mesh.comm("tp"));
  EXPECT_EQ(&stage.comm("dp_tp"), &mesh.comm("dp_tp"));
  EXPECT_FALSE(stage.has_axis("pp"));
  EXPECT_EQ(error_message<InvalidArgument>([&] { stage.comm("pp"); }),
            "mesh dp_shard=2,tp=2 has no axis 'pp'; its axes are dp_shard, tp, dp, dp_tp");
  EXPECT_THROW(mesh.flatten("dp_tp", {"tp"}), InvalidArgument);
  EXPECT_THROW(mesh.flatten("tp", {"tp"}), InvalidArgument);
  EXPECT_THROW(mesh.flatten("x", {"tp", "pp"}), InvalidArgument);
  EXPECT_EQ(mesh.to_string(), "mesh pp=2,dp_shard=2,tp=2 at rank " + std::to_string(r) +
                                  " (world rank " + std::to_string(r) + "), coordinates (" +
                                  std::to_string(r / 4) + ", " + std::to_string((r / 2) % 2) +
                                  ", " + std::to_string(r % 2) + ")");
}

TEST(DeviceMesh, ThreeAxesOnEightRanks) {
  spawn_ranks(8, [](RankContext& ctx) { check_three_axes(ctx.world); });
}

// Hybrid sharding with an odd replicate degree and size-1 axes: "dp" spans both data axes.
void check_hybrid(Communicator& world) {
  DeviceMesh mesh(world, parse_mesh_spec("pp=1,dp_replicate=3,dp_shard=2,tp=1"));
  const int r = world.rank();
  EXPECT_EQ(mesh.axis_size("dp"), 6);
  EXPECT_EQ(mesh.axis_rank("dp"), r);
  EXPECT_EQ(mesh.axis_group("dp_replicate"), (std::vector<int>{r % 2, r % 2 + 2, r % 2 + 4}));
  EXPECT_EQ(mesh.comm("dp").size(), 6);
  EXPECT_EQ(mesh.comm("tp").size(), 1);
  EXPECT_EQ(mesh.comm("pp").world_ranks(), std::vector<int>{r});
  EXPECT_EQ(all_reduced_rank_sum(mesh.comm("dp_replicate")), 3 * (r % 2) + 6);
  EXPECT_EQ(all_reduced_rank_sum(mesh.comm("tp")), r);
}

TEST(DeviceMesh, HybridShardingWithSizeOneAxes) {
  spawn_ranks(6, [](RankContext& ctx) { check_hybrid(ctx.world); });
}

// The "dp" communicator numbers its ranks as MeshLayout::span_coordinate does, so a Layout over
// "dp" gives each rank the chunk its rank in that communicator names.
void check_dp_numbering(Communicator& world) {
  DeviceMesh mesh(world, {{"dp_replicate", 2}, {"dp_shard", 2}, {"tp", 2}});
  const int r = world.rank();
  Communicator& dp = mesh.comm("dp");
  EXPECT_EQ(dp.size(), mesh.layout().span_size("dp"));
  EXPECT_EQ(dp.rank(), mesh.layout().span_coordinate(r, "dp"));
  EXPECT_EQ(dp.rank(), r / 2);  // tp innermost: rank = (replicate * 2 + shard) * 2 + tp
  for (int k = 0; k < dp.size(); ++k)
    EXPECT_EQ(mesh.layout().span_coordinate(dp.world_ranks()[k], "dp"), k);
  const Shape global{10, 3};
  const auto pieces = Layout({{"dp", Shard(0)}}).local_pieces(global, mesh.layout(), r);
  const ShardRange rows = shard_range(10, dp.size(), dp.rank());
  EXPECT_EQ(pieces, (std::vector<LocalPiece>{{{{rows.offset, 0}, {rows.size, 3}}, {0, 0}}}));
}

TEST(DeviceMesh, DpNumberingMatchesTheLayoutMath) {
  spawn_ranks(8, [](RankContext& ctx) { check_dp_numbering(ctx.world); });
}

TEST(DeviceMesh, SingleRankWithoutAxes) {
  spawn_ranks(1, [](RankContext& ctx) {
    DeviceMesh mesh(ctx.world, MeshLayout());
    EXPECT_EQ(mesh.size(), 1);
    EXPECT_EQ(mesh.axis_size("dp"), 1);
    EXPECT_EQ(mesh.comm("dp").size(), 1);
  });
}

TEST(DeviceMesh, RejectsAMeshOfTheWrongSize) {
  spawn_ranks(6, [](RankContext& ctx) {
    EXPECT_EQ(error_message<InvalidArgument>([&] {
                DeviceMesh(ctx.world, {{"pp", 2}, {"dp_shard", 2}, {"tp", 2}});
              }),
              "pp(2) * dp_shard(2) * tp(2) = 8 != world size 6");
  });
}

}  // namespace
}  // namespace meshtrain
