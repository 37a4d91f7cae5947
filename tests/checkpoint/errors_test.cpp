// Damaged checkpoints and mismatched requests fail with errors that name the file and the tensor.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "meshtrain/checkpoint/checkpoint_reader.h"
#include "meshtrain/checkpoint/durable_files.h"
#include "meshtrain/core/error.h"
#include "tests/checkpoint/checkpoint_test_support.h"
#include "tests/support/error_message.h"
#include "tests/support/scratch_dir.h"

namespace meshtrain::testing {
namespace {

namespace fs = std::filesystem;

class CheckpointErrors : public ::testing::Test {
 protected:
  ScratchDir dir;
  // w: rows 0..3 in rank 0's shard, rows 4..7 in rank 1's; chunks of 32 bytes (two rows).
  std::vector<TestTensor> tensors = {{"w", {8, 4}, {{"dp_shard", Shard(0)}}, 1.0f}};
  std::string path = save_on("dp_shard=2", dir.file("ckpt"), 4, tensors, chunks_of(32));
  std::string shard1 = path + "/rank-00001.safetensors";
  std::string index = path + "/index.json";

  void read_all() {
    CheckpointReader reader(path);
    reader.read("w", {8, 4}, Tensor::empty({8, 4}), {{{{0, 0}, {8, 4}}, {0, 0}}});
  }
  void flip_byte(const std::string& file, uint64_t from_end) {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-static_cast<std::streamoff>(from_end), std::ios::end);
    const char c = static_cast<char>(f.get() ^ 0x10);
    f.seekp(-static_cast<std::streamoff>(from_end), std::ios::end);
    f.put(c);
  }
  void edit_index(const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json json = nlohmann::json::parse(read_small_file(index));
    edit(json);
    write_file_synced(index, json.dump());
  }
};

TEST_F(CheckpointErrors, TruncatedShard) {
  fs::resize_file(shard1, fs::file_size(shard1) - 10);
  expect_error<IoError>([&] { read_all(); }, "rank-00001.safetensors", "truncated", "tensor 'w'");
}

TEST_F(CheckpointErrors, CorruptedShardDataFailsItsChunkOnly) {
  flip_byte(shard1, 1);  // the last row's last element: chunk 1 of rank 1's slice
  expect_error<IoError>([&] { read_all(); }, "rank-00001.safetensors", "tensor 'w'",
                        "slice 'w@4,0'", "chunk 1 (bytes 32 to 64)", "corrupted");
  CheckpointReader reader(path);
  const Tensor rows = Tensor::empty({4, 4});
  reader.read_box("w", {{2, 0}, {4, 4}}, rows);  // rows 2..5 miss rank 1's chunk 1
  EXPECT_EQ(rows.to_vector()[0], 1.0f + 8 / 4.0f);
}

TEST_F(CheckpointErrors, CorruptedIndexJson) {
  const std::string text = read_small_file(index);
  write_file_synced(index, text.substr(0, text.size() / 2));
  expect_error<IoError>([&] { CheckpointReader reader(path); }, "index.json", "not valid JSON");
}

TEST_F(CheckpointErrors, IndexOfAnotherFormatOrVersionOrMissingFields) {
  edit_index([](nlohmann::json& j) { j["version"] = 2; });
  expect_error<IoError>([&] { CheckpointReader reader(path); }, "index.json", "version 2");
  edit_index([](nlohmann::json& j) { j["format"] = "other"; });
  expect_error<IoError>([&] { CheckpointReader reader(path); }, "not a meshtrain checkpoint");
  edit_index([](nlohmann::json& j) {
    j["format"] = "meshtrain.checkpoint";
    j["version"] = 1;
    j["tensors"]["w"]["slices"][1].erase("crc32");
  });
  expect_error<IoError>([&] { CheckpointReader reader(path); }, "index.json", "tensor 'w'",
                        "slice 1", "missing field 'crc32'");
}

TEST_F(CheckpointErrors, IndexWhoseSlicesDoNotTileTheTensor) {
  edit_index([](nlohmann::json& j) { j["tensors"]["w"]["slices"][1]["offset"] = {3, 0}; });
  expect_error<IoError>([&] { CheckpointReader reader(path); }, "index.json", "tensor 'w'",
                        "do not tile it", "overlap at offset [3, 0]");
}

TEST_F(CheckpointErrors, MissingShardFile) {
  fs::remove(shard1);
  expect_error<IoError>([&] { read_all(); }, "rank-00001.safetensors", "is missing", "tensor 'w'");
}

TEST_F(CheckpointErrors, MissingTensor) {
  CheckpointReader reader(path);
  EXPECT_FALSE(reader.contains("v"));
  expect_error<InvalidArgument>(
      [&] {
        reader.read("v", {8, 4}, Tensor::empty({8, 4}), {{{{0, 0}, {8, 4}}, {0, 0}}});
      },
      "step-00000004", "has no tensor 'v'");
}

TEST_F(CheckpointErrors, ShapeMismatch) {
  CheckpointReader reader(path);
  expect_error<InvalidArgument>(
      [&] {
        reader.read("w", {8, 5}, Tensor::empty({8, 5}), {{{{0, 0}, {8, 5}}, {0, 0}}});
      },
      "tensor 'w'", "stored with shape [8, 4]", "expects [8, 5]");
}

}  // namespace
}  // namespace meshtrain::testing
