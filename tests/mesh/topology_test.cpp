#include "meshtrain/mesh/topology.h"

#include <gtest/gtest.h>

#include "meshtrain/core/error.h"
#include "meshtrain/mesh/mesh_mapping.h"
#include "tests/support/error_message.h"

namespace meshtrain {
namespace {

using testing::error_message;
constexpr double kNvlink = 450, kIb = 50;

std::vector<int> iota(int n) {
  std::vector<int> v(n);
  for (int i = 0; i < n; ++i) v[i] = i;
  return v;
}

TEST(Topology, ClusterBottlenecks) {
  const Topology t = Topology::cluster(2, 8, kNvlink, kIb);
  ASSERT_EQ(t.num_gpus(), 16);
  EXPECT_EQ(t.gpu_name(9), "node1/gpu1");
  EXPECT_EQ(t.gpu_index("node1/gpu1"), 9);
  EXPECT_EQ(t.bottleneck(0, 7).gb_s, kNvlink);
  EXPECT_EQ(t.bottleneck(0, 7).kind, LinkKind::nvlink);
  EXPECT_EQ(t.bottleneck(3, 12).gb_s, kIb);
  EXPECT_EQ(t.bottleneck(3, 12).kind, LinkKind::ib);
  EXPECT_EQ(t.locality_order(), iota(16));
  // PCIe slower than the network: the host link becomes the cross-node bottleneck.
  const Topology slow_pcie = Topology::cluster(2, 2, kNvlink, kIb, 32);
  EXPECT_EQ(slow_pcie.bottleneck(0, 2).gb_s, 32);
  EXPECT_EQ(slow_pcie.bottleneck(0, 2).kind, LinkKind::pcie);
}

TEST(MeshMapping, TpInsideANodeDpAcrossNodes2x8) {
  const Topology t = Topology::cluster(2, 8, kNvlink, kIb);
  const MeshMapping m = map_mesh(MeshLayout({{"dp_shard", 2}, {"tp", 8}}), t);
  EXPECT_EQ(m.device_of_rank, iota(16));
  ASSERT_EQ(m.axes.size(), 2u);
  EXPECT_EQ(m.axes[0].axis, "dp_shard");
  EXPECT_EQ(m.axes[0].bottleneck->gb_s, kIb);
  EXPECT_EQ(m.axes[1].bottleneck->gb_s, kNvlink);
  EXPECT_EQ(m.report(), "dp_shard (size 2): 50 GB/s over ib\ntp (size 8): 450 GB/s over nvlink\n");
}

TEST(MeshMapping, ThreeAxes4x8) {
  const Topology t = Topology::cluster(4, 8, kNvlink, kIb);
  const MeshLayout mesh({{"pp", 2}, {"dp_replicate", 1}, {"dp_shard", 2}, {"tp", 8}});
  const MeshMapping m = map_mesh(mesh, t);
  EXPECT_EQ(m.report(),
            "pp (size 2): 50 GB/s over ib\n"
            "dp_replicate (size 1): no communication\n"
            "dp_shard (size 2): 50 GB/s over ib\n"
            "tp (size 8): 450 GB/s over nvlink\n");
  // dp_shard=4 with tp=2: a node holds 4 tp pairs, so dp_shard groups of 4 still fit in a node.
  const MeshMapping m2 = map_mesh(MeshLayout({{"pp", 4}, {"dp_shard", 4}, {"tp", 2}}), t);
  EXPECT_EQ(m2.axes[2].bottleneck->gb_s, kNvlink);
  EXPECT_EQ(m2.axes[1].bottleneck->gb_s, kNvlink);
  EXPECT_EQ(m2.axes[0].bottleneck->gb_s, kIb);
  const auto dp_tp = group_bottleneck(t, MeshLayout({{"pp", 4}, {"dp_shard", 4}, {"tp", 2}}),
                                      m2.device_of_rank, {"dp_shard", "tp"});
  EXPECT_EQ(dp_tp->gb_s, kNvlink);
}

TEST(MeshMapping, TpTooLargeForANodeReportsTheSlowerLink) {
  const Topology t = Topology::cluster(2, 8, kNvlink, kIb);
  const MeshMapping m = map_mesh(MeshLayout({{"tp", 16}}), t);
  EXPECT_EQ(m.axes[0].bottleneck->gb_s, kIb);
  EXPECT_EQ(m.axes[0].bottleneck->kind, LinkKind::ib);
  // tp=4 fits; dp_shard=4 then spans both nodes.
  const MeshMapping m2 = map_mesh(MeshLayout({{"dp_shard", 4}, {"tp", 4}}), t);
  EXPECT_EQ(m2.axes[0].bottleneck->gb_s, kIb);
  EXPECT_EQ(m2.axes[1].bottleneck->gb_s, kNvlink);
}

TEST(MeshMapping, PriorityDecidesWhichAxisGetsNvlink) {
  const Topology t = Topology::cluster(2, 8, kNvlink, kIb);
  const MeshLayout mesh({{"dp_shard", 2}, {"tp", 8}});
  const MeshMapping m = map_mesh(mesh, t, {"dp_shard", "tp"});
  // Ranks are counted onto GPUs dp_shard fastest: rank (dp, tp) -> GPU 2 * tp + dp.
  for (int r = 0; r < 16; ++r) EXPECT_EQ(m.device_of_rank[r], 2 * (r % 8) + r / 8);
  EXPECT_EQ(m.axes[0].bottleneck->gb_s, kNvlink);
  EXPECT_EQ(m.axes[1].bottleneck->gb_s, kIb);
  EXPECT_EQ(error_message<InvalidArgument>([&] { map_mesh(mesh, t, {"tp"}); }),
            "the axis priority list does not name mesh axis 'dp_shard'");
  EXPECT_EQ(error_message<InvalidArgument>([&] {
              map_mesh(mesh, t, {"tp", "dp_shard", "tp"});
            }),
            "the axis priority list names axis 'tp' twice");
}

TEST(MeshMapping, MeshLargerThanTopology) {
  const Topology t = Topology::cluster(2, 8, kNvlink, kIb);
  EXPECT_EQ(error_message<InvalidArgument>(
                [&] { map_mesh(MeshLayout({{"dp_shard", 4}, {"tp", 8}}), t); }),
            "mesh dp_shard=4,tp=8 of 32 ranks needs 32 GPUs; the topology has 16");
  // A smaller mesh uses the first GPUs in locality order.
  EXPECT_EQ(map_mesh(MeshLayout({{"tp", 4}}), t).device_of_rank, iota(4));
}

// GPUs declared alternating between two nodes still land node by node.
constexpr const char* kInterleaved = R"(# two nodes of 4 GPUs, declared out of node order
host a
host b
switch a/nvswitch
switch b/nvswitch
nic a/nic a
nic b/nic b
switch fabric   # the InfiniBand switch
gpu a/g0 a
gpu b/g0 b
gpu a/g1 a
gpu b/g1 b
gpu a/g2 a
gpu b/g2 b
gpu a/g3 a
gpu b/g3 b
link a/nic fabric 50 ib
link b/nic fabric 25 ethernet
link a a/nic 64 pcie
link b b/nic 64 pcie
)";

std::string interleaved_text() {
  std::string text = kInterleaved;
  for (const char* node : {"a", "b"})
    for (int g = 0; g < 4; ++g) {
      const std::string gpu = std::string(node) + "/g" + std::to_string(g);
      text += "link " + gpu + " " + node + "/nvswitch 450 nvlink\n";
      text += "link " + gpu + " " + node + " 64 pcie\n";
    }
  return text;
}

TEST(TopologyFile, ParsesAndOrdersByLocality) {
  const Topology t = parse_topology(interleaved_text(), "interleaved.topo");
  ASSERT_EQ(t.num_gpus(), 8);
  EXPECT_EQ(t.gpu_name(1), "b/g0");
  EXPECT_EQ(t.locality_order(), (std::vector<int>{0, 2, 4, 6, 1, 3, 5, 7}));
  EXPECT_EQ(t.bottleneck(0, 1).gb_s, 25);
  EXPECT_EQ(t.bottleneck(0, 1).kind, LinkKind::ethernet);
  const MeshMapping m = map_mesh(MeshLayout({{"dp_shard", 2}, {"tp", 4}}), t);
  EXPECT_EQ(m.device_of_rank, (std::vector<int>{0, 2, 4, 6, 1, 3, 5, 7}));
  EXPECT_EQ(m.report(), "dp_shard (size 2): 25 GB/s over ethernet\ntp (size 4): 450 GB/s over nvlink\n");
}

TEST(TopologyFile, ErrorsNameTheLine) {
  const auto parse_error = [](const std::string& text) {
    return error_message<InvalidArgument>([&] { parse_topology(text, "t.topo"); });
  };
  EXPECT_EQ(parse_error("host h\n\ngpux g h\n"),
            "t.topo:3: unknown keyword 'gpux'; expected host, gpu, nic, switch or link");
  EXPECT_EQ(parse_error("host h\ngpu g\n"), "t.topo:2: 'gpu' takes 2 fields (gpu <name> <host>), got 1");
  EXPECT_EQ(parse_error("gpu g h\n"),
            "t.topo:1: unknown host 'h' (declare it first with host, gpu, nic or switch)");
  EXPECT_EQ(parse_error("host h\nswitch s\ngpu g s\n"), "t.topo:3: gpu 'g': 's' is not a host");
  EXPECT_EQ(parse_error("host h\nhost h\n"), "t.topo:2: vertex 'h' declared twice");
  EXPECT_EQ(parse_error("host h\ngpu g h\nlink g x 10 nvlink\n"),
            "t.topo:3: unknown vertex 'x' (declare it first with host, gpu, nic or switch)");
  EXPECT_EQ(parse_error("host h\ngpu g h\nlink g h fast pcie\n"),
            "t.topo:3: bandwidth 'fast' is not a positive number of GB/s");
  EXPECT_EQ(parse_error("host h\ngpu g h\nlink g h -5 pcie\n"),
            "t.topo:3: bandwidth '-5' is not a positive number of GB/s");
  EXPECT_EQ(parse_error("host h\ngpu g h\nlink g h 5 infiniband\n"),
            "t.topo:3: unknown link kind 'infiniband'; expected nvlink, pcie, ib or ethernet");
  EXPECT_EQ(parse_error("host h\ngpu g h\nlink g g 5 pcie\n"), "t.topo:3: link from 'g' to itself");
  EXPECT_EQ(parse_error("# nothing\nhost h\n"), "t.topo: the topology has no gpu");
  EXPECT_EQ(parse_error("host h\ngpu g0 h\ngpu g1 h\n"),
            "t.topo: gpu 'g1' cannot reach gpu 'g0': no path of links joins them");
  EXPECT_EQ(error_message<IoError>([] { load_topology("/nonexistent/cluster.topo"); }),
            "cannot open topology file '/nonexistent/cluster.topo'");
}

TEST(Topology, BuilderErrors) {
  Topology t;
  t.add_host("h");
  t.add_gpu("g", "h");
  EXPECT_THROW(t.add_link("g", "h", 0, LinkKind::pcie), InvalidArgument);
  EXPECT_THROW(Topology::cluster(0, 8, kNvlink, kIb), InvalidArgument);
  EXPECT_THROW(t.gpu_index("nope"), InvalidArgument);
  EXPECT_THROW(t.bottleneck(0, 0), InvalidArgument);
}

}  // namespace
}  // namespace meshtrain
