#include "meshtrain/mesh/layout.h"

#include <algorithm>
#include <cstring>

#include <gtest/gtest.h>

#include "meshtrain/core/error.h"
#include "meshtrain/mesh/layout_copy.h"
#include "tests/support/error_message.h"

namespace meshtrain {
namespace {

using testing::error_message;
using Pieces = std::vector<LocalPiece>;

LocalPiece piece(Shape global_offset, Shape shape, Shape local_offset) {
  return {{std::move(global_offset), std::move(shape)}, std::move(local_offset)};
}

// The one box a layout of plain shards leaves `rank`; checks there is exactly one.
TensorSlice only_box(const Layout& layout, const Shape& global, const MeshLayout& mesh, int rank) {
  const Pieces pieces = layout.local_pieces(global, mesh, rank);
  if (pieces.size() != 1) {
    ADD_FAILURE() << "rank " << rank << " of " << layout.to_string() << " holds " << pieces.size()
                  << " boxes";
    return {};
  }
  EXPECT_EQ(pieces[0].local_offset, Shape(global.size(), 0));
  EXPECT_EQ(layout.local_shape(global, mesh, rank), pieces[0].global.shape);
  return pieces[0].global;
}

// TP over GPT-2's packed c_attn [d, 3d] (d = 4, q | k | v side by side): each tp rank holds its
// heads' columns of q, of k and of v, in that order.
TEST(Layout, BlockedShardGivesEachRankItsPartOfEveryBlock) {
  const MeshLayout mesh({{"tp", 2}});
  const Layout tp({{"tp", Shard(1, 3)}});
  EXPECT_EQ(tp.to_string(), "[tp: Shard(1, blocks=3)]");
  const Shape c_attn{4, 12};
  EXPECT_EQ(tp.local_shape(c_attn, mesh, 1), (Shape{4, 6}));
  EXPECT_EQ(tp.local_pieces(c_attn, mesh, 0),
            (Pieces{piece({0, 0}, {4, 2}, {0, 0}), piece({0, 4}, {4, 2}, {0, 2}),
                    piece({0, 8}, {4, 2}, {0, 4})}));
  EXPECT_EQ(tp.local_pieces(c_attn, mesh, 1),
            (Pieces{piece({0, 2}, {4, 2}, {0, 0}), piece({0, 6}, {4, 2}, {0, 2}),
                    piece({0, 10}, {4, 2}, {0, 4})}));
}

// FSDP then splits the rows of the TP-local [4, 6] piece: three boxes of half the rows each.
TEST(Layout, FsdpSplitsTheRowsOfEachTpBlock) {
  const MeshLayout mesh({{"dp_shard", 2}, {"tp", 2}});  // rank = dp_shard * 2 + tp
  const Layout layout = Layout().then("tp", Shard(1, 3)).then("dp_shard", Shard(0));
  EXPECT_EQ(layout.to_string(), "[tp: Shard(1, blocks=3), dp_shard: Shard(0)]");
  const Shape c_attn{4, 12};
  EXPECT_EQ(layout.local_shape(c_attn, mesh, 3), (Shape{2, 6}));
  EXPECT_EQ(layout.local_pieces(c_attn, mesh, 3),
            (Pieces{piece({2, 2}, {2, 2}, {0, 0}), piece({2, 6}, {2, 2}, {0, 2}),
                    piece({2, 10}, {2, 2}, {0, 4})}));
  EXPECT_EQ(layout.local_pieces(c_attn, mesh, 2),
            (Pieces{piece({2, 0}, {2, 2}, {0, 0}), piece({2, 4}, {2, 2}, {0, 2}),
                    piece({2, 8}, {2, 2}, {0, 4})}));
  EXPECT_EQ(layout.local_pieces(c_attn, mesh, 1)[0], piece({0, 2}, {2, 2}, {0, 0}));
  EXPECT_TRUE(layout.shards_axis("tp"));
  EXPECT_TRUE(layout.shards_axis("dp_shard"));
  EXPECT_FALSE(layout.shards_axis("dp_replicate"));
  EXPECT_FALSE(layout.shards_axis("pp"));
}

// Uneven sizes take ceil-div chunks (shard_math.h), in every block alike.
TEST(Layout, UnevenShardsAreCeilDivChunks) {
  const MeshLayout tp4({{"tp", 4}});
  const Layout vocab({{"tp", Shard(0)}});
  const int64_t rows[] = {17, 17, 17, 16};  // 67 rows (a vocabulary in miniature) over tp = 4
  for (int r = 0; r < 4; ++r)
    EXPECT_EQ(only_box(vocab, {67, 8}, tp4, r), (TensorSlice{{17 * r, 0}, {rows[r], 8}}));
  // Blocks of 5 columns over tp = 2: 3 and 2 columns of each.
  EXPECT_EQ(Layout({{"tp", Shard(1, 3)}}).local_pieces({3, 15}, MeshLayout({{"tp", 2}}), 1),
            (Pieces{piece({0, 3}, {3, 2}, {0, 0}), piece({0, 8}, {3, 2}, {0, 2}),
                    piece({0, 13}, {3, 2}, {0, 4})}));
  // 2 rows over tp = 4 leave ranks 2 and 3 an empty piece, made of no boxes.
  EXPECT_EQ(vocab.local_pieces({2, 8}, tp4, 3), Pieces{});
  EXPECT_EQ(vocab.local_shape({2, 8}, tp4, 3), (Shape{0, 8}));
}

// FSDP shards the TP-local piece: tp splits dim 0 first, then dp_shard splits each tp piece.
TEST(Layout, ShardOrderFollowsTheListedAxes) {
  const MeshLayout mesh({{"dp_shard", 2}, {"tp", 2}});
  const Layout fsdp_after_tp = Layout().then("tp", Shard(0)).then("dp_shard", Shard(0));
  EXPECT_EQ(fsdp_after_tp.to_string(), "[tp: Shard(0), dp_shard: Shard(0)]");
  // Rank = dp_shard * 2 + tp; rows 0..9: tp pieces [0,5) and [5,10), each split 3 + 2.
  const Shape global{10, 4};
  EXPECT_EQ(only_box(fsdp_after_tp, global, mesh, 0), (TensorSlice{{0, 0}, {3, 4}}));
  EXPECT_EQ(only_box(fsdp_after_tp, global, mesh, 2), (TensorSlice{{3, 0}, {2, 4}}));
  EXPECT_EQ(only_box(fsdp_after_tp, global, mesh, 1), (TensorSlice{{5, 0}, {3, 4}}));
  EXPECT_EQ(only_box(fsdp_after_tp, global, mesh, 3), (TensorSlice{{8, 0}, {2, 4}}));
  // The other order splits over dp_shard first: [0,5) then [5,10) per tp rank within.
  const Layout tp_after_fsdp({{"dp_shard", Shard(0)}, {"tp", Shard(0)}});
  EXPECT_EQ(only_box(tp_after_fsdp, global, mesh, 1), (TensorSlice{{3, 0}, {2, 4}}));
  EXPECT_EQ(only_box(tp_after_fsdp, global, mesh, 2), (TensorSlice{{5, 0}, {3, 4}}));
}

TEST(Layout, ColumnShardPartialAndReplicatedAxes) {
  const MeshLayout mesh({{"pp", 2}, {"dp_shard", 3}, {"tp", 2}});
  const Layout layout({{"tp", Shard(1)}, {"dp_shard", Shard(0)}, {"pp", Partial()}});
  EXPECT_EQ(layout.placement("tp"), Placement(Shard(1)));
  EXPECT_EQ(layout.placement("dp_replicate"), Placement(Replicate()));
  EXPECT_FALSE(layout.shards_axis("pp"));  // Partial: full-shaped, summed
  for (int r = 0; r < mesh.size(); ++r) {
    const int tp = r % 2, dp = (r / 2) % 3;
    // dim 1: 5 columns over tp -> 3, 2; dim 0: 2 rows over dp_shard 3 -> 1, 1, 0.
    const int64_t columns = tp == 0 ? 3 : 2;
    EXPECT_EQ(layout.local_shape({2, 5}, mesh, r), (Shape{dp < 2 ? 1 : 0, columns}));
    if (dp < 2)
      EXPECT_EQ(only_box(layout, {2, 5}, mesh, r), (TensorSlice{{dp, 3 * tp}, {1, columns}}));
    else
      EXPECT_EQ(layout.local_pieces({2, 5}, mesh, r), Pieces{});
  }
  EXPECT_EQ(only_box(Layout(), {4, 4}, mesh, 5), (TensorSlice{{0, 0}, {4, 4}}));
}

// "dp" shards over the data axes flattened, numbered as DeviceMesh's "dp" communicator numbers its
// ranks (device_mesh_test checks that agreement on a live mesh).
TEST(Layout, DpEntrySpansTheDataAxes) {
  const MeshLayout mesh({{"dp_replicate", 2}, {"dp_shard", 2}, {"tp", 2}});
  const Layout zero({{"dp", Shard(0)}});
  for (int r = 0; r < mesh.size(); ++r)  // dp rank = r / 2 (tp innermost)
    EXPECT_EQ(only_box(zero, {8, 3}, mesh, r), (TensorSlice{{2 * (r / 2), 0}, {2, 3}}));
  EXPECT_TRUE(zero.shards_axis("dp_replicate"));
  EXPECT_TRUE(zero.shards_axis("dp_shard"));
  EXPECT_TRUE(zero.shards_axis("dp"));
  EXPECT_FALSE(zero.shards_axis("tp"));
  EXPECT_EQ(zero.placement("dp_shard"), Placement(Shard(0)));
  // Without data axes "dp" has size 1: the whole tensor.
  EXPECT_EQ(only_box(zero, {8, 3}, MeshLayout({{"tp", 2}}), 1), (TensorSlice{{0, 0}, {8, 3}}));
}

// Counts, per element of a tensor of `shape`, the boxes that cover it.
void paint(std::vector<int>& counter, const Shape& shape, const Shape& offset, const Shape& extent) {
  for (int64_t n = 0; n < shape_numel(shape); ++n) {
    bool inside = true;
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1, rest = n; d >= 0; --d) {
      const int64_t i = rest % shape[d];
      rest /= shape[d];
      inside = inside && i >= offset[d] && i < offset[d] + extent[d];
    }
    counter[n] += inside;
  }
}

struct Case {
  MeshLayout mesh;
  Layout layout;
  Shape global;
};

std::vector<Case> cases() {
  const MeshLayout tp2({{"tp", 2}}), dp2_tp2({{"dp_shard", 2}, {"tp", 2}});
  const MeshLayout hybrid({{"dp_replicate", 2}, {"dp_shard", 3}, {"tp", 2}});
  const MeshLayout three_d({{"pp", 2}, {"dp_shard", 2}, {"tp", 3}});
  const Layout qkv_fsdp({{"tp", Shard(1, 3)}, {"dp_shard", Shard(0)}});
  return {
      {tp2, Layout({{"tp", Shard(1, 3)}}), {4, 12}},
      {dp2_tp2, qkv_fsdp, {4, 12}},
      {hybrid, qkv_fsdp, {5, 15}},  // uneven rows (2, 2, 1) and block columns (3, 2)
      {hybrid, Layout({{"tp", Shard(0)}, {"dp", Shard(0)}}), {67, 4}},
      {hybrid, Layout({{"dp", Shard(0)}}), {7}},
      // The same dim twice: dp_shard splits the tp piece's 3 columns (one per block) 2 + 1, so a
      // chunk straddles blocks.
      {three_d, Layout({{"tp", Shard(1, 3)}, {"dp_shard", Shard(1)}}), {2, 9}},
      {three_d, Layout({{"dp_shard", Shard(1, 2)}, {"tp", Shard(1, 3)}, {"pp", Partial()}}), {2, 12}},
      {three_d, Layout({{"tp", Shard(0)}, {"dp_shard", Shard(0, 2)}}), {12, 3}},
      {dp2_tp2, Layout({{"tp", Shard(1, 3)}}), {0, 6}},  // empty
      {tp2, Layout(), {3, 2}},
      {MeshLayout(), Layout({{"dp", Shard(0)}}), {3}},
  };
}

// The pieces of each rank tile its local tensor, in local order, and the ranks of each replica
// (the ranks that differ only in the sharded axes) together tile the global tensor exactly once.
TEST(Layout, PiecesTileLocalAndGlobalTensors) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.layout.to_string() + " of " + shape_string(c.global) + " on " +
                 c.mesh.to_string());
    std::vector<std::string> sharded;
    for (const auto& axis : c.mesh.axis_names())
      if (c.layout.shards_axis(axis)) sharded.push_back(axis);
    for (const auto& replica : c.mesh.groups(sharded)) {
      std::vector<int> global_count(shape_numel(c.global), 0);
      for (int r : replica) {
        const Pieces pieces = c.layout.local_pieces(c.global, c.mesh, r);
        const Shape local = c.layout.local_shape(c.global, c.mesh, r);
        EXPECT_TRUE(std::is_sorted(pieces.begin(), pieces.end(), [](const auto& a, const auto& b) {
          return a.local_offset < b.local_offset;
        })) << "rank " << r;
        std::vector<int> local_count(shape_numel(local), 0);
        for (const LocalPiece& p : pieces) {
          EXPECT_GT(shape_numel(p.global.shape), 0) << "rank " << r;
          paint(local_count, local, p.local_offset, p.global.shape);
          paint(global_count, c.global, p.global.offset, p.global.shape);
        }
        EXPECT_EQ(local_count, std::vector<int>(local_count.size(), 1)) << "rank " << r;
      }
      EXPECT_EQ(global_count, std::vector<int>(global_count.size(), 1));
    }
  }
}

Tensor distinct_values(const Shape& shape) {
  std::vector<float> values(shape_numel(shape));
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.1f * static_cast<float>(i + 1);
  return Tensor::from_vector(values, shape);
}

// Every rank copies its piece out of the global tensor; writing all pieces back rebuilds it.
TEST(LayoutCopy, GlobalToLocalToGlobalRoundTripsBitForBit) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.layout.to_string() + " of " + shape_string(c.global) + " on " +
                 c.mesh.to_string());
    const Tensor global = distinct_values(c.global);
    const Tensor rebuilt = Tensor::zeros(c.global);
    for (int r = 0; r < c.mesh.size(); ++r) {
      const Pieces pieces = c.layout.local_pieces(c.global, c.mesh, r);
      const Tensor local = Tensor::empty(c.layout.local_shape(c.global, c.mesh, r));
      copy_global_to_local(local, global, pieces);
      copy_local_to_global(rebuilt, local, pieces);
    }
    EXPECT_EQ(std::memcmp(rebuilt.raw_data(), global.raw_data(), global.nbytes()), 0);
  }
}

// tp rank 1 of c_attn [4, 12] holds columns 2-3 (q), 6-7 (k) and 10-11 (v), side by side.
TEST(LayoutCopy, LocalTensorHoldsTheBlocksSideBySide) {
  const Layout tp({{"tp", Shard(1, 3)}});
  const MeshLayout mesh({{"tp", 2}});
  std::vector<float> values(48);
  for (int i = 0; i < 48; ++i) values[i] = static_cast<float>(i);
  const Tensor global = Tensor::from_vector(values, {4, 12});
  const Tensor local = Tensor::empty({4, 6});
  copy_global_to_local(local, global, tp.local_pieces({4, 12}, mesh, 1));
  const std::vector<float> row0{2, 3, 6, 7, 10, 11}, row3{38, 39, 42, 43, 46, 47};
  EXPECT_EQ(local.rows(0, 1).to_vector(), row0);
  EXPECT_EQ(local.rows(3, 1).to_vector(), row3);
}

TEST(LayoutCopy, Errors) {
  const MeshLayout tp4({{"tp", 4}});
  const Layout vocab({{"tp", Shard(0)}});
  const Tensor global = Tensor::zeros({67, 8});
  const Pieces last = vocab.local_pieces({67, 8}, tp4, 3);  // 16 rows
  EXPECT_THROW(copy_global_to_local(Tensor::empty({16, 8}, DType::bf16), global, last),
               InvalidArgument);
  EXPECT_THROW(copy_global_to_local(Tensor::empty({16 * 8}), global, last), InvalidArgument);
  EXPECT_THROW(copy_local_to_global(Tensor::zeros({60, 8}), Tensor::empty({16, 8}), last),
               InvalidArgument);
  // Pieces of another rank: they fit, but do not fill the local tensor.
  const std::string message = error_message<InvalidArgument>(
      [&] { copy_global_to_local(Tensor::empty({17, 8}), global, last); });
  EXPECT_NE(message.find("the pieces hold 128 elements but local f32[17, 8] on cpu has 136"),
            std::string::npos)
      << message;
}

TEST(Layout, Errors) {
  const MeshLayout tp2({{"tp", 2}});
  EXPECT_EQ(error_message<InvalidArgument>([] { Layout({{"tp", Shard(0)}, {"tp", Shard(1)}}); }),
            "layout [tp: Shard(0)] already places axis 'tp'");
  EXPECT_EQ(error_message<InvalidArgument>(
                [] { Layout({{"dp_shard", Shard(0)}, {"dp", Replicate()}}); }),
            "layout [dp_shard: Shard(0)] places 'dp_shard', which overlaps 'dp' (dp spans the "
            "data axes)");
  EXPECT_THROW(Layout({{"dp", Shard(0)}}).then("dp_replicate", Partial()), InvalidArgument);
  // Blocks that do not divide the dim, as the piece left by earlier axes has it.
  EXPECT_EQ(error_message<InvalidArgument>(
                [&] { Layout({{"tp", Shard(1, 3)}}).local_pieces({4, 10}, tp2, 0); }),
            "layout [tp: Shard(1, blocks=3)] of a tensor of shape [4, 10]: tp splits dim 1 of "
            "extent 10 (local shape [4, 10]) into 3 blocks, which does not divide it");
  const MeshLayout dp4_tp2({{"dp_shard", 4}, {"tp", 2}});
  EXPECT_THROW(Layout({{"dp_shard", Shard(1)}, {"tp", Shard(1, 2)}}).local_shape({2, 12}, dp4_tp2, 0),
               InvalidArgument);  // 12 columns over 4 leave 3, not 2 blocks
  // An axis the mesh lacks, or no axis at all.
  EXPECT_EQ(error_message<InvalidArgument>(
                [&] { Layout({{"dp_shard", Shard(0)}}).local_pieces({4}, tp2, 0); }),
            "mesh tp=2 has no axis 'dp_shard'; its axes are tp, dp");
  EXPECT_THROW(Layout({{"cp", Replicate()}}).local_shape({4}, tp2, 0), InvalidArgument);
  // A dim out of range, a rank outside the mesh.
  EXPECT_EQ(error_message<InvalidArgument>(
                [&] { Layout({{"tp", Shard(2)}}).local_pieces({4, 4}, tp2, 0); }),
            "layout [tp: Shard(2)] shards dim 2 of a tensor of shape [4, 4]");
  EXPECT_THROW(Layout({{"tp", Shard(-1)}}).local_shape({4, 4}, tp2, 0), InvalidArgument);
  EXPECT_THROW(Layout({{"tp", Shard(0)}}).local_shape({4, 4}, tp2, 2), InvalidArgument);
}

}  // namespace
}  // namespace meshtrain
