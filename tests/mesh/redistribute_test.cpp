#include "meshtrain/mesh/redistribute.h"

#include <gtest/gtest.h>

#include "meshtrain/core/comm/local/spawn_ranks.h"
#include "meshtrain/core/error.h"
#include "meshtrain/mesh/device_mesh.h"
#include "meshtrain/mesh/layout.h"
#include "meshtrain/mesh/shard_math.h"

namespace meshtrain {
namespace {

// The box at `offset` of extent `shape` of a global tensor whose element at flat index i holds
// scale * (i + 1).
Tensor global_box(const Shape& global, const Shape& offset, const Shape& shape, float scale) {
  std::vector<float> values;
  std::vector<int64_t> index(shape.size(), 0);
  for (int64_t n = 0; n < shape_numel(shape); ++n) {
    int64_t flat = 0;
    for (size_t d = 0; d < shape.size(); ++d) flat = flat * global[d] + offset[d] + index[d];
    values.push_back(scale * static_cast<float>(flat + 1));
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
  return Tensor::from_vector(values, shape);
}

Tensor whole(const Shape& global, float scale) {
  return global_box(global, Shape(global.size(), 0), global, scale);
}

// This rank's Shard(dim) piece of the global tensor.
Tensor shard_of(const Shape& global, int dim, const Communicator& comm, float scale) {
  const ShardRange r = shard_range(global[dim], comm.size(), comm.rank());
  Shape offset(global.size(), 0), shape = global;
  offset[dim] = r.offset;
  shape[dim] = r.size;
  return global_box(global, offset, shape, scale);
}

void expect_values(const Tensor& actual, const Tensor& expected) {
  ASSERT_EQ(actual.shape(), expected.shape());
  const auto a = actual.to_vector(), e = expected.to_vector();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_FLOAT_EQ(a[i], e[i]) << "element " << i;
}

// Global shapes with the sharded dim of every size from empty to uneven, and the dim it shards.
std::vector<std::pair<Shape, int>> cases() {
  std::vector<std::pair<Shape, int>> out;
  for (int64_t n : {0, 1, 2, 5, 10}) {
    out.push_back({{n}, 0});
    out.push_back({{n, 3}, 0});
    out.push_back({{3, n}, 1});
    out.push_back({{2, n, 2}, 1});
  }
  return out;
}

void check_shard_to_replicate(Communicator& comm) {
  for (const auto& [global, dim] : cases()) {
    const Tensor local = shard_of(global, dim, comm, 1);
    expect_values(redistribute(local, global, Shard(dim), Replicate(), comm), whole(global, 1));
  }
}

void check_partial_to_replicate(Communicator& comm) {
  const float w = static_cast<float>(comm.size()), mine = static_cast<float>(comm.rank() + 1);
  // Rank r holds (r + 1) * x: the sum is W(W+1)/2 * x, the mean (W+1)/2 * x, the max W * x.
  const std::vector<std::pair<ReduceOp, float>> ops{
      {ReduceOp::sum, w * (w + 1) / 2}, {ReduceOp::avg, (w + 1) / 2}, {ReduceOp::max, w}};
  for (const auto& [op, factor] : ops)
    for (const auto& [global, dim] : cases()) {
      const Tensor local = whole(global, mine);
      expect_values(redistribute(local, global, Partial(op), Replicate(), comm),
                    whole(global, factor));
    }
}

void check_partial_to_shard(Communicator& comm) {
  const float w = static_cast<float>(comm.size()), mine = static_cast<float>(comm.rank() + 1);
  const std::vector<std::pair<ReduceOp, float>> ops{
      {ReduceOp::sum, w * (w + 1) / 2}, {ReduceOp::avg, (w + 1) / 2}, {ReduceOp::max, w}};
  for (const auto& [op, factor] : ops)
    for (const auto& [global, dim] : cases()) {
      const Tensor local = whole(global, mine);
      expect_values(redistribute(local, global, Partial(op), Shard(dim), comm),
                    shard_of(global, dim, comm, factor));
    }
}

void check_replicate_to_shard(Communicator& comm) {
  for (const auto& [global, dim] : cases()) {
    comm.reset_counters();
    expect_values(redistribute(whole(global, 1), global, Replicate(), Shard(dim), comm),
                  shard_of(global, dim, comm, 1));
    EXPECT_EQ(comm.counters().total_sent(), 0u);
  }
}

// Short shards travel padded to the ceil-div chunk: 10 rows of 3 floats over W ranks move
// ceil(10 / W) * 3 * 4 bytes to each of the W - 1 others.
void check_padding_volume(Communicator& comm) {
  const int w = comm.size();
  comm.reset_counters();
  redistribute(shard_of({10, 3}, 0, comm, 1), {10, 3}, Shard(0), Replicate(), comm);
  EXPECT_EQ(comm.counters().sent(CommOp::all_gather),
            static_cast<uint64_t>(shard_chunk(10, w) * 3 * 4 * (w - 1)));
}

void check_errors(Communicator& comm) {
  const Tensor full = whole({4, 2}, 1);
  EXPECT_EQ(redistribute(full, {4, 2}, Replicate(), Replicate(), comm).storage(), full.storage());
  EXPECT_THROW(redistribute(full, {4, 2}, Shard(0), Partial(), comm), NotSupported);
  EXPECT_THROW(redistribute(full, {4, 2}, Replicate(), Partial(), comm), NotSupported);
  EXPECT_THROW(redistribute(full, {4, 2}, Partial(ReduceOp::sum), Partial(ReduceOp::max), comm),
               NotSupported);
  try {
    redistribute(full, {4, 2}, Shard(0), Shard(1), comm);
    ADD_FAILURE() << "Shard(0) -> Shard(1) should not be supported";
  } catch (const NotSupported& e) {
    EXPECT_EQ(std::string(e.what()),
              "redistribute Shard(0) -> Shard(1) on 'world' is not supported; supported: "
              "Shard->Replicate, Partial->Replicate, Partial->Shard, Replicate->Shard");
  }
  EXPECT_THROW(redistribute(full, {4, 2}, Replicate(), Shard(2), comm), InvalidArgument);
  // A blocked shard's piece is several chunks; these collectives move one.
  EXPECT_THROW(redistribute(full, {4, 2}, Replicate(), Shard(1, 2), comm), NotSupported);
  if (comm.size() > 1) {  // a full tensor is not a shard
    EXPECT_THROW(redistribute(full, {4, 2}, Shard(0), Replicate(), comm), InvalidArgument);
  }
}

class Redistribute : public ::testing::TestWithParam<int> {};

TEST_P(Redistribute, ShardToReplicateAllGathers) {
  spawn_ranks(GetParam(), [](RankContext& ctx) { check_shard_to_replicate(ctx.world); });
}
TEST_P(Redistribute, PartialToReplicateAllReduces) {
  spawn_ranks(GetParam(), [](RankContext& ctx) { check_partial_to_replicate(ctx.world); });
}
TEST_P(Redistribute, PartialToShardReduceScatters) {
  spawn_ranks(GetParam(), [](RankContext& ctx) { check_partial_to_shard(ctx.world); });
}
TEST_P(Redistribute, ReplicateToShardTakesTheLocalChunk) {
  spawn_ranks(GetParam(), [](RankContext& ctx) { check_replicate_to_shard(ctx.world); });
}
TEST_P(Redistribute, UnevenShardsArePadded) {
  spawn_ranks(GetParam(), [](RankContext& ctx) { check_padding_volume(ctx.world); });
}
TEST_P(Redistribute, IdentityAndErrors) {
  spawn_ranks(GetParam(), [](RankContext& ctx) { check_errors(ctx.world); });
}

INSTANTIATE_TEST_SUITE_P(LocalBackend, Redistribute, ::testing::Values(1, 2, 3, 4),
                         [](const auto& info) { return "world" + std::to_string(info.param); });

// The layout [tp: Shard(0), dp_shard: Shard(0)] (FSDP shards the TP-local piece) is undone by
// gathering over dp_shard, which rebuilds the tp piece, then over tp.
void check_layout_round_trip(Communicator& world) {
  DeviceMesh mesh(world, {{"dp_shard", 2}, {"tp", 3}});
  const Shape global{11, 2};
  const Layout layout({{"tp", Shard(0)}, {"dp_shard", Shard(0)}});
  // Plain shards leave each rank one box of the global tensor.
  const auto mine = layout.local_pieces(global, mesh.layout(), mesh.rank());
  const auto tp_pieces = Layout({{"tp", Shard(0)}}).local_pieces(global, mesh.layout(), mesh.rank());
  ASSERT_EQ(mine.size(), 1u);
  ASSERT_EQ(tp_pieces.size(), 1u);
  const Tensor local = global_box(global, mine[0].global.offset, mine[0].global.shape, 1);
  const TensorSlice& tp_piece = tp_pieces[0].global;
  const Tensor gathered_dp =
      redistribute(local, tp_piece.shape, Shard(0), Replicate(), mesh.comm("dp_shard"));
  expect_values(gathered_dp, global_box(global, tp_piece.offset, tp_piece.shape, 1));
  expect_values(redistribute(gathered_dp, global, Shard(0), Replicate(), mesh.comm("tp")),
                whole(global, 1));
}

TEST(RedistributeOnMesh, FsdpOverTpLayoutRoundTrip) {
  spawn_ranks(6, [](RankContext& ctx) { check_layout_round_trip(ctx.world); });
}

}  // namespace
}  // namespace meshtrain
