#include <gtest/gtest.h>

#include "core/error.h"
#include "mesh/layout.h"
#include "mesh/placement.h"
#include "mesh/shard_math.h"

namespace meshtrain {
namespace {

std::vector<int64_t> shard_sizes(int64_t n, int parts) {
  std::vector<int64_t> sizes;
  for (int i = 0; i < parts; ++i) sizes.push_back(shard_range(n, parts, i).size);
  return sizes;
}

TEST(ShardMath, CeilDivChunksWithShortOrEmptyTail) {
  EXPECT_EQ(shard_sizes(10, 4), (std::vector<int64_t>{3, 3, 3, 1}));
  EXPECT_EQ(shard_sizes(2, 4), (std::vector<int64_t>{1, 1, 0, 0}));
  EXPECT_EQ(shard_sizes(8, 4), (std::vector<int64_t>{2, 2, 2, 2}));
  EXPECT_EQ(shard_sizes(0, 3), (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(shard_sizes(7, 1), (std::vector<int64_t>{7}));
  EXPECT_EQ(shard_range(10, 4, 3), (ShardRange{9, 1}));
  EXPECT_EQ(shard_range(2, 4, 3), (ShardRange{2, 0}));
  EXPECT_EQ(shard_chunk(10, 4), 3);
}

TEST(ShardMath, ShardsTileTheDimension) {
  for (int64_t n = 0; n <= 13; ++n)
    for (int parts = 1; parts <= 6; ++parts) {
      int64_t next = 0;
      for (int i = 0; i < parts; ++i) {
        const ShardRange r = shard_range(n, parts, i);
        EXPECT_EQ(r.offset, std::min(n, i * ((n + parts - 1) / parts)));
        EXPECT_EQ(r.offset, next);
        next += r.size;
      }
      EXPECT_EQ(next, n);
    }
  EXPECT_THROW(shard_range(4, 2, 2), InvalidArgument);
  EXPECT_THROW(shard_chunk(4, 0), InvalidArgument);
}

TEST(Placement, KindsAndNames) {
  const Placement s = Shard(1), r = Replicate(), p = Partial(ReduceOp::avg);
  EXPECT_TRUE(s.is_shard());
  EXPECT_EQ(s.shard_dim(), 1);
  EXPECT_TRUE(r.is_replicate());
  EXPECT_TRUE(Placement().is_replicate());
  EXPECT_EQ(p.reduce_op(), ReduceOp::avg);
  EXPECT_EQ(Placement(Partial()).reduce_op(), ReduceOp::sum);
  EXPECT_EQ(s.to_string(), "Shard(1)");
  EXPECT_EQ(r.to_string(), "Replicate()");
  EXPECT_EQ(p.to_string(), "Partial(avg)");
  EXPECT_EQ(Placement(Shard(0)), Placement(Shard(0)));
  EXPECT_NE(Placement(Shard(0)), Placement(Shard(1)));
  EXPECT_NE(Placement(Partial(ReduceOp::max)), Placement(Partial(ReduceOp::sum)));
  EXPECT_THROW(r.shard_dim(), InvalidArgument);
  EXPECT_THROW(s.reduce_op(), InvalidArgument);
}

// FSDP shards the TP-local piece: tp splits dim 0 first, then dp_shard splits each tp piece.
TEST(Layout, ShardOrderFollowsTheListedAxes) {
  const MeshLayout mesh({{"dp_shard", 2}, {"tp", 2}});
  const Layout fsdp_after_tp = Layout().then("tp", Shard(0)).then("dp_shard", Shard(0));
  EXPECT_EQ(fsdp_after_tp.to_string(), "[tp: Shard(0), dp_shard: Shard(0)]");
  // Rank = dp_shard * 2 + tp; rows 0..9: tp pieces [0,5) and [5,10), each split 3 + 2.
  const Shape global{10, 4};
  EXPECT_EQ(fsdp_after_tp.local_slice(global, mesh, 0), (TensorSlice{{0, 0}, {3, 4}}));
  EXPECT_EQ(fsdp_after_tp.local_slice(global, mesh, 2), (TensorSlice{{3, 0}, {2, 4}}));
  EXPECT_EQ(fsdp_after_tp.local_slice(global, mesh, 1), (TensorSlice{{5, 0}, {3, 4}}));
  EXPECT_EQ(fsdp_after_tp.local_slice(global, mesh, 3), (TensorSlice{{8, 0}, {2, 4}}));
  // The other order splits over dp_shard first: [0,5) then [5,10) per tp rank within.
  const Layout tp_after_fsdp({{"dp_shard", Shard(0)}, {"tp", Shard(0)}});
  EXPECT_EQ(tp_after_fsdp.local_slice(global, mesh, 1), (TensorSlice{{3, 0}, {2, 4}}));
  EXPECT_EQ(tp_after_fsdp.local_slice(global, mesh, 2), (TensorSlice{{5, 0}, {3, 4}}));
}

TEST(Layout, ColumnShardPartialAndReplicatedAxes) {
  const MeshLayout mesh({{"pp", 2}, {"dp_shard", 3}, {"tp", 2}});
  const Layout layout({{"tp", Shard(1)}, {"dp_shard", Shard(0)}, {"pp", Partial()}});
  EXPECT_EQ(layout.placement("tp"), Placement(Shard(1)));
  EXPECT_EQ(layout.placement("dp_replicate"), Placement(Replicate()));
  for (int r = 0; r < mesh.size(); ++r) {
    const int tp = r % 2, dp = (r / 2) % 3;
    // dim 1: 5 columns over tp -> 3, 2; dim 0: 2 rows over dp_shard 3 -> 1, 1, 0.
    EXPECT_EQ(layout.local_slice({2, 5}, mesh, r),
              (TensorSlice{{std::min(dp, 2), 3 * tp}, {dp < 2 ? 1 : 0, tp == 0 ? 3 : 2}}));
  }
  EXPECT_EQ(Layout().local_slice({4, 4}, mesh, 5), (TensorSlice{{0, 0}, {4, 4}}));
}

TEST(Layout, Errors) {
  const MeshLayout mesh({{"tp", 2}});
  EXPECT_THROW(Layout({{"tp", Shard(0)}, {"tp", Shard(1)}}), InvalidArgument);
  EXPECT_THROW(Layout({{"tp", Shard(2)}}).local_slice({4, 4}, mesh, 0), InvalidArgument);
  EXPECT_THROW(Layout({{"dp_shard", Shard(0)}}).local_slice({4}, mesh, 0), InvalidArgument);
}

}  // namespace
}  // namespace meshtrain
