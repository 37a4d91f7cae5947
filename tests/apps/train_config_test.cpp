// TrainConfig::validate: each bad setting is an InvalidArgument naming the flag and what was
// expected.
#include "meshtrain/train/train_config.h"

#include <algorithm>
#include <limits>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "meshtrain/train/bound_strategies.h"
#include "meshtrain/train/reporter.h"
#include "meshtrain/train/run_estimate.h"
#include "meshtrain/core/device_memory.h"
#include "meshtrain/core/error.h"
#include "meshtrain/core/ops/cpu/cpu_threads.h"

namespace meshtrain {
namespace {

using ::testing::HasSubstr;

// A config that passes validation (validate does not open the data file).
TrainConfig valid_config() {
  TrainConfig c;
  c.model = gpt2_model(gpt2_preset("demo"));  // ctx 64
  c.data_path = "tokens.bin";
  c.batch = 8;
  c.seq = 64;
  c.world = 4;
  return c;
}

std::string validate_message(const TrainConfig& c) {
  try {
    c.validate();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "<valid>";
}

TEST(TrainConfig, ValidConfigPasses) {
  EXPECT_NO_THROW(valid_config().validate());
  TrainConfig c = valid_config();
  c.mesh = parse_mesh_spec("dp_replicate=2,dp_shard=2");
  EXPECT_NO_THROW(c.validate());
  c.mesh = parse_mesh_spec("dp_shard=4,tp=1");  // a size-1 tp axis needs no strategy
  EXPECT_NO_THROW(c.validate());
}

TEST(TrainConfig, DefaultMeshIsDpShardOverTheWorld) {
  TrainConfig c = valid_config();
  c.world = 3;
  EXPECT_EQ(c.effective_mesh().to_string(), "dp_shard=3");
  c.mesh = parse_mesh_spec("dp_replicate=3");
  EXPECT_EQ(c.effective_mesh().to_string(), "dp_replicate=3");
}

// Ranks split the CPUs this process may use; --threads overrides; never fewer than one thread.
TEST(TrainConfig, ThreadsPerRankSplitsTheCpus) {
  const int cpus = ops::cpu::available_cpus();
  ASSERT_GE(cpus, 1);
  TrainConfig c = valid_config();
  c.world = 1;
  EXPECT_EQ(c.threads_per_rank(), cpus);
  c.world = 2;
  EXPECT_EQ(c.threads_per_rank(), std::max(1, cpus / 2));
  c.world = 4 * cpus;  // more ranks than CPUs: one thread each, not zero
  EXPECT_EQ(c.threads_per_rank(), 1);
  c.threads = 3;
  EXPECT_EQ(c.threads_per_rank(), 3);
  c.world = 4;
  c.threads = -1;
  EXPECT_THAT(validate_message(c), HasSubstr("--threads must be positive"));
}

TEST(TrainConfig, BatchNotDivisibleByDataParallelDegree) {
  TrainConfig c = valid_config();
  c.batch = 6;  // dp_shard=4 by default
  const std::string msg = validate_message(c);
  EXPECT_THAT(msg, HasSubstr("--batch must divide by the data-parallel degree 4"));
  // The degree is the product of both data axes.
  c = valid_config();
  c.world = 6;
  c.batch = 8;
  c.mesh = parse_mesh_spec("dp_replicate=3,dp_shard=2");
  EXPECT_THAT(validate_message(c), HasSubstr("data-parallel degree 6"));
}

TEST(TrainConfig, LocalBatchNotDivisibleByGradAccum) {
  TrainConfig c = valid_config();
  c.batch = 8;  // 2 per data rank
  c.grad_accum = 4;
  const std::string msg = validate_message(c);
  EXPECT_THAT(msg, HasSubstr("--grad-accum"));
  EXPECT_THAT(msg, HasSubstr("(2)"));
}

TEST(TrainConfig, SeqLongerThanContext) {
  TrainConfig c = valid_config();
  c.seq = 65;
  const std::string msg = validate_message(c);
  EXPECT_THAT(msg, HasSubstr("--seq 65 exceeds the model's context length 64"));
  EXPECT_THAT(msg, HasSubstr("65"));
  EXPECT_THAT(msg, HasSubstr("64"));
}

TEST(TrainConfig, MeshSizeMustMatchWorld) {
  TrainConfig c = valid_config();
  c.mesh = parse_mesh_spec("dp_shard=2");  // world is 4
  const std::string msg = validate_message(c);
  EXPECT_THAT(msg, HasSubstr("dp_shard(2)"));
  EXPECT_THAT(msg, HasSubstr("world size 4"));
}

TEST(TrainConfig, EveryAxisHasItsStrategy) {
  TrainConfig c = valid_config();
  c.mesh = parse_mesh_spec("dp_shard=2,tp=2");
  EXPECT_EQ(validate_message(c), "<valid>");
  c.mesh = parse_mesh_spec("pp=2,dp_shard=2");
  EXPECT_EQ(validate_message(c), "<valid>");
}

TEST(TrainConfig, HeadsMustDivideByTp) {
  TrainConfig c = valid_config();
  c.world = 3;
  c.batch = 3;
  c.mesh = parse_mesh_spec("tp=3");
  EXPECT_THAT(validate_message(c),
              HasSubstr("tp: module 'h.0.attn' (style heads): tensor parallelism splits "
                        "attention heads over tp: 4 heads do not divide by tp=3"));
}

TEST(TrainConfig, PluginOptionsAreParsedByTheirPlugin) {
  TrainConfig c = valid_config();
  c.set("fsdp", "mode", "sharded");
  EXPECT_THAT(validate_message(c), HasSubstr("fsdp option mode (--fsdp) expects one of full, "
                                             "grad_op, none or hybrid, got 'sharded'"));
  c = valid_config();
  c.set("tp", "sequence_parallel", "yes");
  EXPECT_THAT(validate_message(c), HasSubstr("tp option sequence_parallel (--sequence-parallel) "
                                             "expects true or false, got 'yes'"));
  c = valid_config();
  c.set("tp", "sequence", "true");
  EXPECT_THAT(validate_message(c), HasSubstr("unknown tp option 'sequence'"));
  c = valid_config();
  c.set("pp", "virtual", "0");
  EXPECT_THAT(validate_message(c), HasSubstr("pp option virtual (--virtual) expects an integer of "
                                             "at least 1, got '0'"));
  c = valid_config();
  c.set("ep", "experts", "8");
  EXPECT_THAT(validate_message(c), HasSubstr("unknown strategy 'ep'; known strategies: fsdp, pp, tp"));
}

TEST(TrainConfig, LearningRateMustBeFinite) {
  TrainConfig c = valid_config();
  c.lr.lr = std::numeric_limits<float>::infinity();
  EXPECT_THAT(validate_message(c), HasSubstr("lr must be finite and >= 0, got inf"));
}

TEST(TrainConfig, MissingDataAndNonPositiveCounts) {
  TrainConfig c = valid_config();
  c.data_path.clear();
  EXPECT_THAT(validate_message(c), HasSubstr("--data"));
  c = valid_config();
  c.steps = 0;
  EXPECT_THAT(validate_message(c), HasSubstr("--steps must be positive"));
  c = valid_config();
  c.batch = 0;
  EXPECT_THAT(validate_message(c), HasSubstr("--batch must be positive"));
  c = valid_config();
  c.grad_accum = 0;
  EXPECT_THAT(validate_message(c), HasSubstr("--grad-accum must be positive"));
  c = valid_config();
  c.world = 0;
  EXPECT_THAT(validate_message(c), HasSubstr("--world must be at least 1"));
  c = valid_config();
  c.clip = -1.f;
  EXPECT_THAT(validate_message(c), HasSubstr("--clip must not be negative"));
  c = valid_config();
  c.weight_decay = -0.1f;
  EXPECT_THAT(validate_message(c), HasSubstr("--wd must not be negative"));
}

// Sizes that would run for hours or build for ever are refused before the run (issue 25).
TEST(TrainConfig, ThreadsAndSampleAreBounded) {
  TrainConfig c = valid_config();
  c.threads = 5000;
  EXPECT_THAT(validate_message(c), HasSubstr("--threads 5000 is out of range; at most 4096"));
  c = valid_config();
  c.sample_bytes = (int64_t{1} << 20) + 1;
  EXPECT_THAT(validate_message(c), HasSubstr("--sample 1048577 is out of range; at most 1048576"));
  c.sample_bytes = int64_t{1} << 20;
  EXPECT_EQ(validate_message(c), "<valid>");
}

// Sizes in messages keep their small values: a nearly full tmpfs used to read "0 MiB free, needs
// about 0 MiB".
TEST(TrainConfig, MessagesGiveSmallSizesInTheirOwnUnit) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(uint64_t{3} << 30), "3.0 GiB");
}

TEST(TrainConfig, ParseBackend) {
  EXPECT_EQ(parse_backend("local"), BackendKind::local);
  EXPECT_EQ(parse_backend("mpi"), BackendKind::mpi);
  EXPECT_EQ(parse_backend("nccl"), BackendKind::nccl);
  EXPECT_EQ(backend_name(BackendKind::mpi), "mpi");
  try {
    parse_backend("gloo");
    ADD_FAILURE() << "gloo accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("unknown backend 'gloo'"));
    EXPECT_THAT(std::string(e.what()), HasSubstr("local, mpi or nccl"));
  }
}

TEST(TrainConfig, DeviceAndBackendAgree) {
  TrainConfig c = valid_config();
  c.backend = BackendKind::nccl;
  EXPECT_THAT(validate_message(c), HasSubstr("--backend nccl moves GPU buffers: add --device cuda"));
  c = valid_config();
  c.backend = BackendKind::mpi;
  c.device = DeviceKind::cuda;
  EXPECT_THAT(validate_message(c), HasSubstr("--backend mpi moves host buffers"));
  EXPECT_EQ(valid_config().rank_device(3), Device::cpu());
}

TEST(TrainConfig, CudaDeviceNeedsAGpu) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "a GPU is visible";
  TrainConfig c = valid_config();
  c.device = DeviceKind::cuda;
  EXPECT_THAT(validate_message(c), HasSubstr("--device cuda: no CUDA device is visible"));
}

// Each strategy states its share of the model state: PP's stage, TP's piece, FSDP's shard (over
// both data axes in full mode, dp_shard only in hybrid, none unsharded); the run's is the product.
TEST(TrainConfig, ModelStateShareIsTheProductOfTheStrategiesShares) {
  TrainConfig c = valid_config();
  c.world = 16;
  c.batch = 16;
  c.mesh = parse_mesh_spec("pp=2,dp_replicate=2,dp_shard=2,tp=2");
  const auto share = [&] { return model_state_share(bind_strategies(c), c.mesh); };
  EXPECT_DOUBLE_EQ(share().fraction, 1.0 / 16);
  EXPECT_FALSE(share().on_host);
  c.set("fsdp", "mode", "hybrid");
  EXPECT_DOUBLE_EQ(share().fraction, 1.0 / 8);
  c.set("fsdp", "mode", "none");
  c.set("fsdp", "offload", "true");
  EXPECT_DOUBLE_EQ(share().fraction, 1.0 / 4);
  EXPECT_TRUE(share().on_host);
}

// The host memory a rank needs at least: the ZeRO model state of its shard (16 bytes a parameter:
// fp32 master, gradient and two AdamW moments), its micro-batch's fp32 logits and the local
// backend's overhead on the host; on GPUs only the overhead, plus the model state when offloaded.
TEST(TrainConfig, HostMemoryEstimateCountsWhatLivesOnTheHost) {
  TrainConfig c = valid_config();  // dp_shard=4, batch 8, seq 64
  const double params = static_cast<double>(c.model->num_parameters());
  const double state = 16.0 * params / 4;
  const double logits = 4.0 * (8 / 4) * 64 * static_cast<double>(c.model->vocab());
  const double overhead = local_rank_overhead_bytes(4);
  HostBytes host = estimate_rank_host_bytes(c);
  EXPECT_DOUBLE_EQ(host.bytes, state + logits + overhead);
  EXPECT_EQ(host.parts, "model state, logits, the local backend's overhead");
  c.device = DeviceKind::cuda;
  host = estimate_rank_host_bytes(c);
  EXPECT_DOUBLE_EQ(host.bytes, overhead);
  EXPECT_EQ(host.parts, "the local backend's overhead");
  c.set("fsdp", "offload", "true");
  host = estimate_rank_host_bytes(c);
  EXPECT_DOUBLE_EQ(host.bytes, state + overhead);
  EXPECT_EQ(host.parts, "offloaded model state, the local backend's overhead");
  c.set("fsdp", "mode", "none");  // unsharded: every rank holds the whole state
  EXPECT_DOUBLE_EQ(estimate_rank_host_bytes(c).bytes, 4 * state + overhead);
  c.backend = BackendKind::nccl;
  EXPECT_DOUBLE_EQ(estimate_rank_host_bytes(c).bytes, 4 * state);
}

// Issue 25: at --world 2000 the tiny model peaked at 11.4 GiB against 6 GB estimated, and 3000
// passed the check and ran the machine out of memory. The per-rank overhead grows with the world,
// and stays below each measured peak (MiB per rank at W = 250, 500, 1000, 2000).
TEST(TrainConfig, LocalRankOverheadGrowsWithTheWorldBelowTheMeasuredPeaks) {
  const std::vector<std::pair<int, double>> measured = {
      {250, 2.632}, {500, 3.084}, {1000, 3.648}, {2000, 5.837}};
  for (const auto& [world, mib] : measured)
    EXPECT_LE(local_rank_overhead_bytes(world), mib * (1 << 20) * 1.0001) << "W = " << world;
  EXPECT_GT(local_rank_overhead_bytes(3000) * 3000, 28.0 * (1u << 30))
      << "W = 3000 of the tiny model does not fit a 24 GiB machine";
}

}  // namespace
}  // namespace meshtrain
