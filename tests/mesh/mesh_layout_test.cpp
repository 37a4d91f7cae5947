#include "meshtrain/mesh/mesh_layout.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "meshtrain/core/error.h"
#include "tests/support/error_message.h"

namespace meshtrain {
namespace {

using testing::error_message;
using Groups = std::vector<std::vector<int>>;

// Megatron-LM's worked example: 16 GPUs, tensor-parallel 2, pipeline-parallel 4, so data 2.
TEST(MeshLayout, MegatronExampleGroups) {
  const MeshLayout mesh({{"pp", 4}, {"dp_shard", 2}, {"tp", 2}});
  EXPECT_EQ(mesh.size(), 16);
  EXPECT_EQ(mesh.groups({"tp"}),
            (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}}));
  EXPECT_EQ(mesh.groups({"pp"}),
            (Groups{{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}}));
  EXPECT_EQ(mesh.groups({"dp_shard"}),
            (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}}));
  // Megatron's model-parallel groups: pipeline x tensor.
  EXPECT_EQ(mesh.groups({"pp", "tp"}), (Groups{{0, 1, 4, 5, 8, 9, 12, 13},
                                               {2, 3, 6, 7, 10, 11, 14, 15}}));
}

TEST(MeshLayout, CoordinatesAreRowMajorWithTpInnermost) {
  const MeshLayout mesh({{"pp", 2}, {"dp_shard", 3}, {"tp", 2}});
  for (int r = 0; r < 12; ++r) {
    EXPECT_EQ(mesh.coordinates(r), (std::vector<int>{r / 6, (r / 2) % 3, r % 2}));
    EXPECT_EQ(mesh.rank_of(mesh.coordinates(r)), r);
    EXPECT_EQ(mesh.group_rank(r, {"dp_shard"}), (r / 2) % 3);
    EXPECT_EQ(mesh.group_rank(r, {"dp_shard", "tp"}), r % 6);
    EXPECT_EQ(mesh.group_of(r, {"pp"}), (std::vector<int>{r % 6, r % 6 + 6}));
  }
}

TEST(MeshLayout, GroupsPartitionTheRanks) {
  const MeshLayout mesh({{"pp", 3}, {"dp_replicate", 1}, {"dp_shard", 2}, {"tp", 2}});
  for (const auto& axes : std::vector<std::vector<std::string>>{
           {}, {"pp"}, {"dp_replicate"}, {"tp"}, {"dp_replicate", "dp_shard"}, {"pp", "dp_shard", "tp"}}) {
    std::vector<int> seen(mesh.size(), 0);
    for (const auto& g : mesh.groups(axes))
      for (int r : g) ++seen[r];
    EXPECT_EQ(seen, std::vector<int>(mesh.size(), 1));
  }
  EXPECT_EQ(mesh.groups({}).size(), 12u);
  EXPECT_EQ(mesh.groups({"dp_replicate"})[5], std::vector<int>{5});
}

// Against the listed group, for every rank and every set of axes in mesh order: groups over two
// axes, groups over axes that are not neighbours, groups that do not hold rank 0.
TEST(MeshLayout, GroupBoundsAreTheListedGroupsEnds) {
  const MeshLayout mesh({{"pp", 3}, {"dp_replicate", 2}, {"dp_shard", 2}, {"tp", 2}});
  const std::vector<std::string> names = mesh.axis_names();
  for (int subset = 0; subset < (1 << names.size()); ++subset) {
    std::vector<std::string> axes;
    for (size_t i = 0; i < names.size(); ++i)
      if (subset & (1 << i)) axes.push_back(names[i]);
    for (int r = 0; r < mesh.size(); ++r) {
      const std::vector<int> group = mesh.group_of(r, axes);
      const auto [lowest, highest] = std::minmax_element(group.begin(), group.end());
      EXPECT_EQ(mesh.group_bounds(r, axes), std::make_pair(*lowest, *highest))
          << "rank " << r << " axes " << ::testing::PrintToString(axes);
    }
  }
  EXPECT_EQ(mesh.group_bounds(13, mesh.span("dp")), std::make_pair(9, 15));
}

TEST(MeshLayout, SubLayoutAndQueries) {
  const MeshLayout mesh({{"pp", 2}, {"dp_replicate", 1}, {"dp_shard", 2}, {"tp", 4}});
  EXPECT_EQ(mesh.sub_layout({"dp_shard", "tp"}), MeshLayout({{"dp_shard", 2}, {"tp", 4}}));
  EXPECT_EQ(mesh.axis_size("tp"), 4);
  EXPECT_EQ(mesh.axis_index("dp_shard"), 2);
  EXPECT_TRUE(mesh.has_axis("dp_replicate"));
  EXPECT_FALSE(MeshLayout({{"tp", 2}}).has_axis("pp"));
  EXPECT_EQ(mesh.to_string(), "pp=2,dp_replicate=1,dp_shard=2,tp=4");
  EXPECT_EQ(MeshLayout().size(), 1);
  EXPECT_EQ(MeshLayout().coordinates(0), std::vector<int>{});
}

TEST(MeshLayout, ValidationMessages) {
  EXPECT_EQ(error_message<InvalidArgument>([] {
              MeshLayout({{"pp", 2}, {"dp_shard", 2}, {"tp", 2}}).check_world_size(6);
            }),
            "pp(2) * dp_shard(2) * tp(2) = 8 != world size 6");
  EXPECT_EQ(error_message<InvalidArgument>([] { MeshLayout({{"tp", 2}, {"cp", 2}}); }),
            "unknown mesh axis 'cp'; known axes are pp, dp_replicate, dp_shard, tp");
  EXPECT_EQ(error_message<InvalidArgument>([] { MeshLayout({{"tp", 2}, {"tp", 2}}); }),
            "mesh axis 'tp' given twice");
  EXPECT_EQ(error_message<InvalidArgument>([] { MeshLayout({{"dp_shard", 0}}); }),
            "mesh axis 'dp_shard' has size 0; sizes must be at least 1");
  // 641 x 6700417 = 2^32 + 1, which an int product would wrap to 1.
  EXPECT_THAT(error_message<InvalidArgument>([] {
                MeshLayout({{"pp", 641}, {"dp_shard", 6700417}});
              }),
              ::testing::HasSubstr(
                  "mesh axis 'dp_shard' of size 6700417 makes the mesh larger than the 2^24 "
                  "ranks meshtrain supports"));
  EXPECT_EQ(error_message<InvalidArgument>([] { MeshLayout({{"tp", 2}, {"pp", 2}}); }),
            "mesh axis 'pp' given after 'tp'; axes must be listed outermost to innermost in the "
            "order pp, dp_replicate, dp_shard, tp");
  const MeshLayout mesh({{"pp", 2}, {"tp", 2}});
  EXPECT_EQ(error_message<InvalidArgument>([&] { mesh.axis_size("dp_shard"); }),
            "mesh pp=2,tp=2 has no axis 'dp_shard'; its axes are pp, tp");
  EXPECT_EQ(error_message<InvalidArgument>([&] { mesh.groups({"tp", "pp"}); }),
            "axes tp, pp of mesh pp=2,tp=2 must be distinct and listed in mesh order (pp, tp)");
  EXPECT_THROW(mesh.coordinates(4), InvalidArgument);
}

// "dp" names the data axes present, flattened row-major like any group (dp_replicate outer).
TEST(MeshLayout, SpanResolvesTheFlattenedDataAxis) {
  using Names = std::vector<std::string>;
  const MeshLayout mesh({{"pp", 2}, {"dp_replicate", 2}, {"dp_shard", 3}, {"tp", 2}});
  EXPECT_EQ(mesh.span("tp"), Names{"tp"});
  EXPECT_EQ(mesh.span("dp"), (Names{"dp_replicate", "dp_shard"}));
  EXPECT_EQ(mesh.span_size("dp"), 6);
  EXPECT_EQ(mesh.span_size("pp"), 2);
  for (int r = 0; r < mesh.size(); ++r) {
    const int replicate = (r / 6) % 2, shard = (r / 2) % 3;
    EXPECT_EQ(mesh.span_coordinate(r, "dp"), replicate * 3 + shard);
    EXPECT_EQ(mesh.span_coordinate(r, "dp_shard"), shard);
    EXPECT_EQ(mesh.span_coordinate(r, "tp"), r % 2);
  }
  // One data axis, or none: "dp" is that axis, or nothing of size 1.
  const MeshLayout no_replicate({{"dp_shard", 4}, {"tp", 2}});
  EXPECT_EQ(no_replicate.span("dp"), Names{"dp_shard"});
  EXPECT_EQ(no_replicate.span_coordinate(5, "dp"), 2);
  const MeshLayout tp_only({{"tp", 4}});
  EXPECT_EQ(tp_only.span("dp"), Names{});
  EXPECT_EQ(tp_only.span_size("dp"), 1);
  EXPECT_EQ(tp_only.span_coordinate(3, "dp"), 0);
  EXPECT_EQ(MeshLayout().span_size("dp"), 1);

  EXPECT_EQ(error_message<InvalidArgument>([&] { tp_only.span("dp_shard"); }),
            "mesh tp=4 has no axis 'dp_shard'; its axes are tp, dp");
  EXPECT_EQ(error_message<InvalidArgument>([&] { mesh.span_size("data"); }),
            "mesh pp=2,dp_replicate=2,dp_shard=3,tp=2 has no axis 'data'; its axes are pp, "
            "dp_replicate, dp_shard, tp, dp");
  EXPECT_THROW(tp_only.span_coordinate(4, "tp"), InvalidArgument);
}

TEST(MeshLayout, ParseMeshSpec) {
  EXPECT_EQ(parse_mesh_spec("pp=2,dp_shard=2,tp=2"),
            MeshLayout({{"pp", 2}, {"dp_shard", 2}, {"tp", 2}}));
  EXPECT_EQ(parse_mesh_spec(" dp_replicate = 1 , tp=8 "),
            MeshLayout({{"dp_replicate", 1}, {"tp", 8}}));
  const MeshLayout round_trip({{"pp", 4}, {"dp_replicate", 2}, {"dp_shard", 3}, {"tp", 1}});
  EXPECT_EQ(parse_mesh_spec(round_trip.to_string()), round_trip);

  const std::string expected = "; expected name=size items separated by commas, e.g. "
                               "'pp=2,dp_shard=2,tp=2'";
  EXPECT_EQ(error_message<InvalidArgument>([] { parse_mesh_spec(""); }),
            "empty mesh spec" + expected);
  EXPECT_EQ(error_message<InvalidArgument>([] { parse_mesh_spec("pp=2,tp"); }),
            "mesh spec item 'tp' has no '='" + expected);
  EXPECT_EQ(error_message<InvalidArgument>([] { parse_mesh_spec("pp=2,,tp=2"); }),
            "mesh spec item '' has no '='" + expected);
  EXPECT_EQ(error_message<InvalidArgument>([] { parse_mesh_spec("tp=two"); }),
            "mesh spec item 'tp=two': size 'two' is not an integer" + expected);
  EXPECT_EQ(error_message<InvalidArgument>([] { parse_mesh_spec("tp=2x"); }),
            "mesh spec item 'tp=2x': size '2x' is not an integer" + expected);
  EXPECT_EQ(error_message<InvalidArgument>([] { parse_mesh_spec("tp=-1"); }),
            "mesh axis 'tp' has size -1; sizes must be at least 1");
  EXPECT_EQ(error_message<InvalidArgument>([] { parse_mesh_spec("data=2"); }),
            "unknown mesh axis 'data'; known axes are pp, dp_replicate, dp_shard, tp");
}

}  // namespace
}  // namespace meshtrain
