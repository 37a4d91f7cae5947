// Crafted checkpoint files (docs/failures.md, "Hostile checkpoint files"): every number read from
// the index is range-checked before arithmetic, every name stays inside the checkpoint folder and
// every size is capped, so a hostile file ends in an error that names the file, the field and what
// was expected; never a crash, and never a read outside the checkpoint.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "meshtrain/checkpoint/checkpoint_reader.h"
#include "meshtrain/checkpoint/convert.h"
#include "meshtrain/checkpoint/durable_files.h"
#include "meshtrain/core/error.h"
#include "meshtrain/models/safetensors.h"
#include "tests/checkpoint/checkpoint_test_support.h"
#include "tests/support/error_message.h"
#include "tests/support/scratch_dir.h"

namespace meshtrain::testing {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kTwoTo63 = uint64_t{1} << 63;

class HostileIndex : public ::testing::Test {
 protected:
  ScratchDir dir;
  // w: rows 0..3 in rank 0's shard, rows 4..7 in rank 1's; chunks of 32 bytes (two rows).
  std::vector<TestTensor> tensors = {{"w", {8, 4}, {{"dp_shard", Shard(0)}}, 1.0f}};
  std::string path = save_on("dp_shard=2", dir.file("ckpt"), 4, tensors, chunks_of(32));
  std::string index = path + "/index.json";

  void edit_index(const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json json = nlohmann::json::parse(read_small_file(index));
    edit(json);
    write_file_synced(index, json.dump());
  }
  // Opens the checkpoint and reads the whole tensor, as --resume, --init DIR and convert do.
  void load() {
    CheckpointReader reader(path);
    reader.read("w", {8, 4}, Tensor::empty({8, 4}), {{{{0, 0}, {8, 4}}, {0, 0}}});
  }
};

// Before: offset + extent wrapped below the shape, the slice passed as inside the tensor and the
// reader copied its rows 2^63 elements past the output (heap corruption).
TEST_F(HostileIndex, SliceOffsetThatWrapsPastTheShape) {
  edit_index([](nlohmann::json& j) {
    auto& slice = j["tensors"]["w"]["slices"][1];
    slice["offset"] = {kTwoTo63 - 4, 0};  // its key still names the shard's slice
  });
  expect_error<IoError>([&] { load(); }, "index.json", "tensor 'w'",
                        "slice 'w@4,0' at offset [9223372036854775804, 0]",
                        "leaves the tensor's [8, 4]");
}

// Before: the chunk count wrapped to 0, so empty CRC lists passed, and the reader copied from past
// its (empty) read window.
TEST_F(HostileIndex, HugeChunkBytesWithEmptyCrcLists) {
  edit_index([](nlohmann::json& j) {
    j["chunk_bytes"] = UINT64_MAX;
    for (auto& slice : j["tensors"]["w"]["slices"]) slice["crc32"] = nlohmann::json::array();
  });
  expect_error<IoError>([&] { load(); }, "index.json", "'chunk_bytes'", "at most 1073741824",
                        "18446744073709551615");
}

TEST_F(HostileIndex, ConvertRefusesIt) {
  edit_index([](nlohmann::json& j) {
    j["chunk_bytes"] = UINT64_MAX;
    for (auto& slice : j["tensors"]["w"]["slices"]) slice["crc32"] = nlohmann::json::array();
  });
  expect_error<IoError>([&] { checkpoint_to_safetensors(path, dir.file("w.safetensors")); },
                        "index.json", "'chunk_bytes'");
}

// Before: the shard was opened wherever the name pointed, here a copy of it outside the checkpoint.
TEST_F(HostileIndex, FileNamesThatLeaveTheFolder) {
  const std::string shard = "rank-00001.safetensors";
  fs::copy_file(path + "/" + shard, dir.file("outside.safetensors"));
  const std::string names[] = {"../../outside.safetensors", dir.file("outside.safetensors"),
                               "sub/" + shard, "..", ".", "", std::string("rank\0x", 6)};
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    edit_index([&](nlohmann::json& j) {
      std::string held;
      for (const auto& [file, info] : j["files"].items())
        if (file != "rank-00000.safetensors") held = file;
      j["files"][name] = j["files"][held];
      j["files"].erase(held);
      j["tensors"]["w"]["slices"][1]["file"] = name;
    });
    expect_error<IoError>([&] { load(); }, "index.json", "'files'", "plain file name");
  }
}

// Before: the index was read whole, whatever its size (a 3 GiB one took 3 GiB).
TEST_F(HostileIndex, IndexPastTheSizeLimit) {
  fs::resize_file(index, (64u << 20) + 1);
  expect_error<IoError>([&] { load(); }, "index.json", "67108865 bytes", "at most 64 MiB");
}

// Before: printing the mistyped value in the error recursed a million levels (stack overflow).
TEST_F(HostileIndex, DeeplyNestedJson) {
  edit_index([](nlohmann::json& j) { j["step"] = "deep"; });
  std::string text = read_small_file(index);
  const size_t at = text.find("\"deep\"");
  text.replace(at, 6, std::string(1'000'000, '[') + std::string(1'000'000, ']'));
  write_file_synced(index, text);
  expect_error<IoError>([&] { load(); }, "index.json", "nested deeper than 64");
}

// Before: a number past double's range escaped as the JSON library's own exception (the way
// fuzz_safetensors found it in a safetensors header; std::terminate).
TEST_F(HostileIndex, NumberPastTheDoubleRange) {
  edit_index([](nlohmann::json& j) { j["step"] = "past double"; });
  std::string text = read_small_file(index);
  const std::string mark = "\"past double\"";
  text.replace(text.find(mark), mark.size(), "1e999");
  write_file_synced(index, text);
  expect_error<IoError>([&] { load(); }, "index.json", "is not valid JSON", "overflow");
}

// Before: step 2^63 became a negative step, and world 2^32 + 2 became 2.
TEST_F(HostileIndex, NumbersOutOfRange) {
  edit_index([](nlohmann::json& j) { j["step"] = kTwoTo63; });
  expect_error<IoError>([&] { load(); }, "index.json", "'step' must be",
                        "at most 9223372036854775807", "got 9223372036854775808");
  edit_index([](nlohmann::json& j) {
    j["step"] = 4;
    j["world"] = (uint64_t{1} << 32) + 2;
  });
  expect_error<IoError>([&] { load(); }, "index.json", "'world' must be", "at most 2147483647");
  edit_index([](nlohmann::json& j) { j["world"] = 3; });
  expect_error<IoError>([&] { load(); }, "index.json", "'world' is 3",
                        "'files' lists 2 shards (one per rank)");
}

// Before: [2^32, 2^32] held 0 elements by wrapping, and a dim of 2^64 - 1 became -1.
TEST_F(HostileIndex, ShapesPastTheLimits) {
  const auto add_tensor = [&](const nlohmann::json& shape) {
    edit_index([&](nlohmann::json& j) {
      j["tensors"]["e"] = {{"shape", shape}, {"dtype", "F32"}, {"slices", nlohmann::json::array()}};
    });
  };
  add_tensor({uint64_t{1} << 32, uint64_t{1} << 32});
  expect_error<IoError>([&] { load(); }, "index.json", "tensor 'e'",
                        "shape [4294967296, 4294967296] holds more than 2^48 elements");
  add_tensor({0, UINT64_MAX});
  expect_error<IoError>([&] { load(); }, "index.json", "tensor 'e'",
                        "'shape' must be an array of integers in [0, 2^63)");
}

// Before: slices whose offsets were swapped loaded each other's rows (their CRCs match their data).
TEST_F(HostileIndex, SliceKeysThatNameAnotherSlice) {
  edit_index([](nlohmann::json& j) {
    auto& slices = j["tensors"]["w"]["slices"];
    std::swap(slices[0]["offset"], slices[1]["offset"]);
  });
  expect_error<IoError>([&] { load(); }, "index.json", "tensor 'w'", "slice 0",
                        "'key' is 'w@0,0'", "expected 'w@4,0'");
  edit_index([](nlohmann::json& j) {
    auto& slices = j["tensors"]["w"]["slices"];
    std::swap(slices[0]["offset"], slices[1]["offset"]);
    std::swap(slices[0]["key"], slices[1]["key"]);
  });
  expect_error<IoError>([&] { load(); }, "index.json", "tensor 'w'", "slice 0",
                        "'key' is 'w@4,0'", "expected 'w@0,0'");
}

TEST_F(HostileIndex, SliceLargerThanItsFile) {
  edit_index([](nlohmann::json& j) { j["files"]["rank-00001.safetensors"]["bytes"] = 10; });
  expect_error<IoError>([&] { CheckpointReader reader(path); }, "index.json",
                        "tensor 'w': slice 1: its data is 64 bytes",
                        "more than the 10 bytes 'files' gives 'rank-00001.safetensors'");
}

TEST_F(HostileIndex, StepThatDisagreesWithItsMarkerOrFolder) {
  const std::string marker = path + "/COMPLETE";
  write_file_synced(marker, "step 5\n");
  expect_error<IoError>([&] { load(); }, "COMPLETE", R"(reads "step 5\n", expected "step 4\n")");
  write_file_synced(marker, std::string(1u << 20, 's'));
  expect_error<IoError>([&] { load(); }, "COMPLETE", "1048576 bytes", "at most 64");
  write_file_synced(marker, "step 5\n");
  edit_index([](nlohmann::json& j) { j["step"] = 5; });
  expect_error<IoError>([&] { load(); }, "index.json", "'step' is 5",
                        "its folder 'step-00000004' is named for step 4");
}

// Training metadata names the step twice more; copies that disagree mean an edited or mixed-up
// checkpoint. Before: a run resumed at step 4 with AdamW's bias correction of step 10^18.
TEST_F(HostileIndex, MetadataStepsThatDisagreeWithTheIndex) {
  edit_index([](nlohmann::json& j) { j["metadata"]["step"] = 9; });
  expect_error<IoError>([&] { load(); }, "index.json", "'metadata': 'step' is 9",
                        "expected the index's step 4");
  edit_index([](nlohmann::json& j) {
    j["metadata"]["step"] = 4;
    j["metadata"]["optimizer"] = {{"name", "adamw"}, {"steps", 1'000'000'000'000'000'000}};
  });
  expect_error<IoError>([&] { load(); }, "index.json",
                        "'metadata': 'optimizer': 'steps' is 1000000000000000000",
                        "expected at most the index's step 4");
  edit_index([](nlohmann::json& j) { j["metadata"]["optimizer"]["steps"] = 4; });
  load();
}

// The caller's box, checked as the index's are. Before: it passed the reader's check by wrapping,
// and only a check further down (for_each_box_run) caught it.
TEST_F(HostileIndex, ReadBoxPastTheShape) {
  CheckpointReader reader(path);
  expect_error<InvalidArgument>(
      [&] { reader.read_box("w", {{INT64_MAX - 2, 0}, {4, 4}}, Tensor::empty({4, 4})); },
      "checkpoint read of 'w'",
      "box at [9223372036854775805, 0] of shape [4, 4] leaves the tensor's [8, 4]");
}

// The same overflow in a safetensors header (a shard, or a file to --init or convert from).
// Before: a dim of 2^64 - 1 beside a 0 passed the element limit and became -1.
TEST(HostileSafetensors, DimPast2To63BesideAZero) {
  ScratchDir dir;
  const std::string file = dir.file("x.safetensors");
  const std::string header =
      R"({"x": {"dtype": "F32", "shape": [0, 18446744073709551615], "data_offsets": [0, 0]}})";
  std::ofstream out(file, std::ios::binary);
  const uint64_t length = header.size();
  out.write(reinterpret_cast<const char*>(&length), 8);
  out << header;
  out.close();
  expect_error<IoError>([&] { SafetensorsReader reader(file); }, "x.safetensors", "tensor 'x'",
                        "shape [0,18446744073709551615]", "2^48");
}

}  // namespace
}  // namespace meshtrain::testing
