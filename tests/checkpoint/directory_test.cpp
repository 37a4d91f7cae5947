// The checkpoint folder's housekeeping: pruning that a crash cannot leave half done, and the lock
// that keeps a second run out of a folder in use.
#include <unistd.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "meshtrain/checkpoint/checkpoint_directory.h"
#include "meshtrain/core/error.h"
#include "tests/checkpoint/checkpoint_test_support.h"
#include "tests/support/error_message.h"
#include "tests/support/scratch_dir.h"

namespace meshtrain::testing {
namespace {

namespace fs = std::filesystem;

const std::vector<TestTensor> kTensors = {{"w", {4, 2}, {{"dp_shard", Shard(0)}}, 1.0f}};

// What a prune killed midway leaves: before, a step folder stripped of its marker and index (never
// listed again, so never pruned); now, a step renamed aside to .step-N.pruned. The next prune
// removes both.
TEST(CheckpointPrune, RemovesWhatAnInterruptedPruneLeft) {
  ScratchDir dir;
  const std::string ckpt = dir.file("ckpt");
  for (int64_t step : {1, 2, 3}) save_on("dp_shard=2", ckpt, step, kTensors);
  fs::remove(ckpt + "/step-00000001/COMPLETE");
  fs::remove(ckpt + "/step-00000001/index.json");
  fs::rename(ckpt + "/step-00000002", ckpt + "/.step-00000002.pruned");
  save_on("dp_shard=2", ckpt, 4, kTensors, keeping(2));
  EXPECT_EQ(entries_of(ckpt), (std::vector<std::string>{"step-00000003", "step-00000004"}));
}

TEST(CheckpointDirectoryLock, ASecondHolderIsRefusedNamingTheFirst) {
  ScratchDir dir;
  const std::string ckpt = dir.file("new/ckpt");
  {
    const CheckpointDirectoryLock first(ckpt);  // creates the folder
    expect_error<IoError>([&] { CheckpointDirectoryLock second(ckpt); },
                          "the checkpoint folder '" + ckpt + "' is in use by another run (pid " +
                              std::to_string(::getpid()) + " on ",
                          "holding '" + ckpt + "/.lock'); wait for it to end, or write to "
                                               "another folder");
  }
  const CheckpointDirectoryLock again(ckpt);  // released with the first
}

// An index its readers would refuse (past kMaxCheckpointIndexBytes) is never written, so no
// checkpoint is published that cannot be resumed: here 5 million CRCs of one slice, about 70 MB.
TEST(CheckpointIndexFile, OnePastTheReadersLimitIsNotWritten) {
  ScratchDir dir;
  CheckpointIndex index;
  index.chunk_bytes = 1;
  StoredSlice slice{"rank-00000.safetensors", "w@0", {{0}, {5'000'000}}, {}};
  slice.crc32.assign(5'000'000, 4'000'000'000u);
  index.tensors["w"] = {{5'000'000}, {slice}};
  expect_error<IoError>([&] { write_index_file(dir.file(""), index); },
                        "the checkpoint index would be", "past the 64 MiB its readers accept");
  EXPECT_FALSE(fs::exists(dir.file("index.json")));
}

}  // namespace
}  // namespace meshtrain::testing
