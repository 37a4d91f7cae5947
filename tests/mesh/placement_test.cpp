#include <gtest/gtest.h>

#include "meshtrain/core/error.h"
#include "meshtrain/mesh/placement.h"
#include "meshtrain/mesh/shard_math.h"

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

// GPT-2's packed c_attn q|k|v: three blocks, each sharded alike.
TEST(Placement, BlockedShard) {
  const Placement qkv = Shard(1, 3);
  EXPECT_EQ(qkv.shard_dim(), 1);
  EXPECT_EQ(qkv.shard_blocks(), 3);
  EXPECT_EQ(Placement(Shard(1)).shard_blocks(), 1);
  EXPECT_EQ(qkv.to_string(), "Shard(1, blocks=3)");
  EXPECT_EQ(Placement(Shard(1, 1)).to_string(), "Shard(1)");
  EXPECT_EQ(Placement(Shard(1, 1)), Placement(Shard(1)));
  EXPECT_NE(qkv, Placement(Shard(1)));
  EXPECT_THROW(Placement(Shard(0, 0)), InvalidArgument);
  EXPECT_THROW(Placement(Replicate()).shard_blocks(), InvalidArgument);
}

}  // namespace
}  // namespace meshtrain
