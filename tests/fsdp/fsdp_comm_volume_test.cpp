// Bytes moved per step and rank, from the communicators' counters, against the ZeRO formulas in
// closed form. Every parameter is sharded on dim 0 into ceil(rows / W) rows per rank (padded), so
// one all-gather or reduce-scatter of a unit moves (W - 1) * padded shard bytes each way.
#include <gtest/gtest.h>

#include "tests/support/training_runs.h"

namespace meshtrain::testing {
namespace {

uint64_t one_step_bytes(TrainConfig c) {
  c.steps = 1;
  return run_on_mesh(c).metrics.at(0).comm_bytes;
}

class FsdpCommVolume : public ::testing::TestWithParam<int> {
 protected:
  GPT2Config model_{67, 13, 24, 2, 4};
  TrainConfig config(const char* mode) const {
    TrainConfig c = small_config(model_, synthetic_token_file(67, 4096));
    c.world = GetParam();
    c.set("fsdp", "mode", mode);
    return c;
  }
};

TEST_P(FsdpCommVolume, FullGathersTwiceAndReduceScattersOnce) {
  const int64_t w = GetParam();
  uint64_t forward = 0, backward = 0, reduce = 0;
  const auto units = gpt2_units(model_, w);
  for (size_t u = 0; u < units.size(); ++u) {
    const uint64_t bytes = 4 * (w - 1) * units[u].padded;
    forward += bytes;
    if (u > 0) backward += bytes;  // the root stays unsharded from forward to backward
    reduce += bytes;
  }
  EXPECT_EQ(one_step_bytes(config("full")), forward + backward + reduce);
}

TEST_P(FsdpCommVolume, GradOpSkipsTheBackwardGathers) {
  const int64_t w = GetParam();
  uint64_t expected = 0;
  for (const UnitSizes& u : gpt2_units(model_, w)) expected += 2 * 4 * (w - 1) * u.padded;
  EXPECT_EQ(one_step_bytes(config("grad_op")), expected);
}

TEST_P(FsdpCommVolume, NoneAllReducesEveryGradient) {
  const int64_t w = GetParam();
  uint64_t expected = 0;
  for (const UnitSizes& u : gpt2_units(model_, 1)) expected += 2 * (4 * u.full) * (w - 1) / w;
  EXPECT_EQ(one_step_bytes(config("none")), expected);
}

TEST_P(FsdpCommVolume, Bf16HalvesWhereItApplies) {
  const int64_t w = GetParam();
  TrainConfig c = config("full");
  c.set("fsdp", "param_dtype", "bf16");
  uint64_t gathers = 0, reduce = 0;
  const auto units = gpt2_units(model_, w);
  for (size_t u = 0; u < units.size(); ++u) {
    const uint64_t elements = (w - 1) * units[u].padded;
    gathers += (u > 0 ? 2 : 1) * 2 * elements;
    reduce += 4 * elements;
  }
  EXPECT_EQ(one_step_bytes(c), gathers + reduce);
  c.set("fsdp", "reduce_dtype", "bf16");
  EXPECT_EQ(one_step_bytes(c), gathers + reduce / 2);
}

TEST_P(FsdpCommVolume, GradientAccumulationGathersPerMicroBatch) {
  const int64_t w = GetParam();
  uint64_t gathers = 0, reduce = 0;
  const auto units = gpt2_units(model_, w);
  for (size_t u = 0; u < units.size(); ++u) {
    gathers += (u > 0 ? 2 : 1) * 4 * (w - 1) * units[u].padded;
    reduce += 4 * (w - 1) * units[u].padded;
  }
  TrainConfig c = config("full");
  c.grad_accum = 2;
  c.set("fsdp", "grad_sync", "every");
  EXPECT_EQ(one_step_bytes(c), 2 * gathers + 2 * reduce);
  c.set("fsdp", "grad_sync", "last");
  EXPECT_EQ(one_step_bytes(c), 2 * gathers + reduce);
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, FsdpCommVolume, ::testing::Values(2, 3, 4, 8),
                         [](const auto& info) {
                           return std::string("W").append(std::to_string(info.param));
                         });

TEST(FsdpCommVolume, HybridAddsTheReplicaAllReduce) {
  const GPT2Config model{67, 13, 24, 2, 4};
  TrainConfig c = small_config(model, synthetic_token_file(67, 4096));
  c.world = 8;
  c.mesh = parse_mesh_spec("dp_replicate=2,dp_shard=4");
  c.set("fsdp", "mode", "hybrid");
  const int64_t shard = 4, replicas = 2;
  uint64_t expected = 0;
  const auto units = gpt2_units(model, shard);
  for (size_t u = 0; u < units.size(); ++u) {
    const uint64_t bytes = 4 * (shard - 1) * units[u].padded;
    expected += (u > 0 ? 3 : 2) * bytes;                                      // AG, AG, RS
    expected += 2 * (4 * units[u].padded) * (replicas - 1) / replicas;  // AR of the shard
  }
  EXPECT_EQ(one_step_bytes(c), expected);
}

// With sizes that divide W and the root resharded too, ZeRO-3 moves exactly 1.5x and ZeRO-2
// exactly 1.0x the bytes of data parallelism (ZeRO paper, section 7).
TEST(FsdpCommVolume, ZeroRatiosToDataParallel) {
  const GPT2Config model{64, 16, 32, 2, 4};
  TrainConfig c = small_config(model, synthetic_token_file(64, 4096));
  c.world = 4;
  c.set("fsdp", "reshard_root", "true");
  c.set("fsdp", "mode", "none");
  const uint64_t ddp = one_step_bytes(c);
  c.set("fsdp", "mode", "full");
  EXPECT_EQ(2 * one_step_bytes(c), 3 * ddp);
  c.set("fsdp", "mode", "grad_op");
  EXPECT_EQ(one_step_bytes(c), ddp);
}

}  // namespace
}  // namespace meshtrain::testing
