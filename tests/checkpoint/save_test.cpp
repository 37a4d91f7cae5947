// The atomic save protocol: interrupted saves leave the previous checkpoint the latest, a failing
// rank makes every rank throw, old checkpoints are pruned, a step saved again is replaced.
#include <gtest/gtest.h>

#include <filesystem>
#include <stdexcept>

#include "meshtrain/checkpoint/checkpoint_reader.h"
#include "meshtrain/core/comm/local/spawn_ranks.h"
#include "meshtrain/core/device_memory.h"
#include "meshtrain/core/error.h"
#include "tests/checkpoint/checkpoint_test_support.h"
#include "tests/support/error_message.h"
#include "tests/support/scratch_dir.h"

namespace meshtrain::testing {
namespace {

namespace fs = std::filesystem;

std::vector<TestTensor> with_seed(float seed) {
  return {{"w", {9, 3}, {{"dp_shard", Shard(0)}}, seed}, {"b", {4}, {}, seed + 100.0f}};
}

TEST(CheckpointSave, PublishesIndexMarkerAndOneShardPerRank) {
  ScratchDir dir;
  const std::string path = save_on("dp_shard=3", dir.file("ckpt"), 12, with_seed(1.0f));
  EXPECT_EQ(entries_of(dir.file("ckpt")), (std::vector<std::string>{"step-00000012"}));
  EXPECT_EQ(entries_of(path),
            (std::vector<std::string>{"COMPLETE", "index.json", "rank-00000.safetensors",
                                      "rank-00001.safetensors", "rank-00002.safetensors"}));
  EXPECT_EQ(latest_checkpoint(dir.file("ckpt")), path);
}

class InterruptedSave : public ::testing::TestWithParam<std::string> {};

// The process "dies" on rank 0 right after writing one of its files: the step stays partial and
// the previous one is still the latest and loads; saving the step again then succeeds.
TEST_P(InterruptedSave, LeavesThePreviousCheckpointTheLatest) {
  ScratchDir dir;
  const std::string ckpt = dir.file("ckpt");
  const std::string first = save_on("dp_shard=2", ckpt, 1, with_seed(1.0f));
  CheckpointSaveOptions crash;
  crash.after_file = [file = GetParam()](const std::string& path) {
    if (fs::path(path).filename() == file) throw std::runtime_error("simulated crash");
  };
  EXPECT_EQ(error_message<std::runtime_error>(
                [&] { save_on("dp_shard=2", ckpt, 2, with_seed(2.0f), crash); }),
            "simulated crash");
  EXPECT_TRUE(fs::is_directory(ckpt + "/.step-00000002.partial"));
  EXPECT_FALSE(fs::exists(ckpt + "/step-00000002"));
  EXPECT_EQ(latest_checkpoint(ckpt), first);
  expect_loads_on("dp_shard=3", first, with_seed(1.0f));

  const std::string second = save_on("dp_shard=2", ckpt, 2, with_seed(2.0f));
  EXPECT_EQ(latest_checkpoint(ckpt), second);
  EXPECT_EQ(entries_of(ckpt), (std::vector<std::string>{"step-00000001", "step-00000002"}));
  expect_loads_on("dp_shard=1", second, with_seed(2.0f));
}

INSTANTIATE_TEST_SUITE_P(AfterEachFile, InterruptedSave,
                         ::testing::Values("rank-00000.safetensors", "index.json", "COMPLETE"),
                         [](const auto& info) {
                           return info.param == "rank-00000.safetensors" ? std::string("shard")
                                  : info.param == "index.json"           ? std::string("index")
                                                                         : std::string("marker");
                         });

// One rank's bad input (a local tensor its pieces do not fill) fails the save on every rank, which
// names that rank; nothing is published or left behind.
TEST(CheckpointSave, FailureOnOneRankThrowsOnEveryRank) {
  ScratchDir dir;
  const MeshLayout mesh = parse_mesh_spec("dp_shard=3");
  spawn_ranks(3, [&](RankContext& ctx) {
    std::vector<StoredTensor> mine = stored_by(with_seed(1.0f), mesh, ctx.rank);
    if (ctx.rank == 1) mine[0].local = Tensor::zeros({4, 3});  // its one piece is [3, 3]
    expect_error<IoError>([&] { save_checkpoint(ctx.world, dir.file("ckpt"), 3, mine, {}); },
                          "checkpoint save failed on rank 1: ", "checkpoint tensor 'w'",
                          "pieces hold 9 elements");
  });
  EXPECT_EQ(latest_checkpoint(dir.file("ckpt")), std::nullopt);
  EXPECT_TRUE(entries_of(dir.file("ckpt")).empty());
}

// A replicated tensor stored by every rank overlaps itself: rank 0 refuses to index it.
TEST(CheckpointSave, ReplicatedTensorStoredTwiceIsRefused) {
  ScratchDir dir;
  spawn_ranks(2, [&](RankContext& ctx) {
    const std::vector<StoredTensor> mine = {{"b", {4}, Tensor::zeros({4}), {{{{0}, {4}}, {0}}}}};
    expect_error<IoError>([&] { save_checkpoint(ctx.world, dir.file("ckpt"), 0, mine, {}); },
                          "checkpoint save failed on rank 0: ", "tensor 'b'", "overlap",
                          "stored by one rank");
  });
}

// A sharded tensor one rank does not store leaves a gap.
TEST(CheckpointSave, TensorWithAMissingSliceIsRefused) {
  ScratchDir dir;
  const MeshLayout mesh = parse_mesh_spec("dp_shard=2");
  spawn_ranks(2, [&](RankContext& ctx) {
    std::vector<StoredTensor> mine = stored_by(with_seed(1.0f), mesh, ctx.rank);
    if (ctx.rank == 1) mine.erase(mine.begin());
    expect_error<IoError>([&] { save_checkpoint(ctx.world, dir.file("ckpt"), 0, mine, {}); },
                          "checkpoint save failed on rank 0: ", "tensor 'w'",
                          "its slices hold 15 elements, its shape [9, 3] has 27");
  });
}

TEST(CheckpointSave, KeepPrunesTheOldest) {
  ScratchDir dir;
  const std::string ckpt = dir.file("ckpt");
  for (int64_t step : {10, 20, 30, 40})
    save_on("dp_shard=2", ckpt, step, with_seed(1.0f), keeping(2));
  EXPECT_EQ(entries_of(ckpt), (std::vector<std::string>{"step-00000030", "step-00000040"}));
}

TEST(CheckpointSave, KeepPastInt32KeepsAll) {
  ScratchDir dir;
  const std::string ckpt = dir.file("ckpt");
  for (int64_t step : {1, 2, 3})
    save_on("dp_shard=2", ckpt, step, with_seed(1.0f), keeping(4294967297));
  EXPECT_EQ(entries_of(ckpt).size(), 3u);
}

TEST(CheckpointSave, SavingAStepAgainReplacesIt) {
  ScratchDir dir;
  const std::string ckpt = dir.file("ckpt");
  save_on("dp_shard=3", ckpt, 7, with_seed(1.0f));
  const std::string path = save_on("dp_shard=2", ckpt, 7, with_seed(2.0f));
  EXPECT_EQ(entries_of(ckpt), (std::vector<std::string>{"step-00000007"}));
  EXPECT_EQ(CheckpointReader(path).world(), 2);
  expect_loads_on("dp_shard=3", path, with_seed(2.0f));
}

TEST(CheckpointSave, LatestIgnoresIncompleteAndForeignEntries) {
  ScratchDir dir;
  const std::string ckpt = dir.file("ckpt");
  EXPECT_EQ(error_message<IoError>([&] { latest_checkpoint(ckpt); }).find("cannot list"), 0u);
  const std::string done = save_on("dp_shard=1", ckpt, 3, with_seed(1.0f));
  fs::create_directories(ckpt + "/step-00000009");  // no index, no marker
  fs::create_directories(ckpt + "/.step-00000010.partial");
  fs::create_directories(ckpt + "/step-12");  // not a step name this library writes
  fs::copy(done, ckpt + "/step-00000008");
  fs::remove(ckpt + "/step-00000008/COMPLETE");
  EXPECT_EQ(latest_checkpoint(ckpt), done);
  expect_error<IoError>([&] { CheckpointReader reader(ckpt + "/step-00000008"); },
                        "step-00000008' is incomplete", "COMPLETE");
}

// Tensors on a GPU are saved and loaded through the host.
TEST(CheckpointSave, DeviceTensorsRoundTrip) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU";
  ScratchDir dir;
  const TestTensor t{"w", {6, 5}, {}, 3.0f};
  const MeshLayout mesh = parse_mesh_spec("dp_shard=1");
  std::string path;
  spawn_ranks(1, [&](RankContext& ctx) {
    path = save_checkpoint(ctx.world, dir.file("ckpt"), 1,
                           {{t.name, t.shape, global_values(t).to(Device::cuda(0)),
                             Layout().local_pieces(t.shape, mesh, 0)}},
                           {});
  });
  CheckpointReader reader(path);
  const Tensor local = Tensor::zeros({3, 5}, DType::f32, Device::cuda(0));
  reader.read("w", t.shape, local, {{{{3, 0}, {3, 5}}, {0, 0}}});
  const std::vector<float> all = global_values(t).to_vector();
  EXPECT_EQ(local.to_vector(), std::vector<float>(all.begin() + 15, all.end()));
}

}  // namespace
}  // namespace meshtrain::testing
