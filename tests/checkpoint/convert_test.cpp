// Export to one safetensors file (model tensors only) and import as a one-rank checkpoint.
#include "meshtrain/checkpoint/convert.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "meshtrain/checkpoint/checkpoint_directory.h"
#include "meshtrain/checkpoint/checkpoint_reader.h"
#include "meshtrain/checkpoint/durable_files.h"
#include "meshtrain/core/bf16.h"
#include "meshtrain/core/error.h"
#include "meshtrain/models/safetensors.h"
#include "tests/checkpoint/checkpoint_test_support.h"
#include "tests/support/scratch_dir.h"

namespace meshtrain::testing {
namespace {

TEST(CheckpointConvert, ToSafetensorsAndBackAsOneRank) {
  ScratchDir dir;
  const auto tensors = gpt2_like_tensors();
  const std::string saved = save_on("dp_shard=2,tp=2", dir.file("ckpt"), 3, tensors);
  const std::string file = dir.file("model.safetensors");
  checkpoint_to_safetensors(saved, file);

  SafetensorsReader exported(file);
  EXPECT_EQ(exported.metadata().at("format"), "pt");
  EXPECT_EQ(exported.entries().size(), tensors.size() - 1);  // no optimizer state
  for (const TestTensor& t : tensors) {
    const SafetensorsEntry* e = exported.find(t.name);
    if (t.name.starts_with("optimizer.")) {
      EXPECT_EQ(e, nullptr);
      continue;
    }
    ASSERT_NE(e, nullptr) << t.name;
    EXPECT_EQ(e->dtype, "F32");
    const Tensor value = Tensor::empty(t.shape);
    exported.read(t.name, value);
    EXPECT_EQ(value.to_vector(), global_values(t).to_vector()) << t.name;
  }

  const std::string imported =
      safetensors_to_checkpoint(file, dir.file("imported"), 9, {{"source", "hf"}});
  EXPECT_EQ(imported, dir.file("imported/step-00000009"));
  CheckpointReader reader(imported);
  EXPECT_EQ(reader.world(), 1);
  EXPECT_EQ(reader.metadata(), (nlohmann::json{{"source", "hf"}}));
  std::vector<TestTensor> model;
  for (const TestTensor& t : tensors)
    if (!t.name.starts_with("optimizer.")) model.push_back(t);
  EXPECT_EQ(reader.names().size(), model.size());
  expect_loads_on("dp_shard=3", imported, model);
}

// A failed export (here a shard's last byte flipped, caught by its CRC) leaves the file it would
// have replaced as it was, and no partial file.
TEST(CheckpointConvert, AFailedExportKeepsTheFileItWouldReplace) {
  ScratchDir dir;
  const std::string saved = save_on("dp_shard=2", dir.file("ckpt"), 3, gpt2_like_tensors());
  const std::string file = dir.file("model.safetensors");
  checkpoint_to_safetensors(saved, file);
  const std::string before = read_small_file(file);
  {
    std::fstream shard(saved + "/" + shard_file_name(1),
                       std::ios::in | std::ios::out | std::ios::binary);
    shard.seekg(-1, std::ios::end);
    const char last = static_cast<char>(shard.get() ^ 0x10);
    shard.seekp(-1, std::ios::end);
    shard.put(last);
  }
  EXPECT_THROW(checkpoint_to_safetensors(saved, file), Error);
  EXPECT_EQ(read_small_file(file), before);
  EXPECT_FALSE(std::filesystem::exists(file + ".partial"));
}

TEST(CheckpointConvert, RenamesAndLeavesOutKeysOnImport) {
  ScratchDir dir;
  const std::string file = dir.file("hf.safetensors");
  const Tensor value = Tensor::from_vector(std::vector<float>{1.0f, 2.0f}, {2});
  {
    SafetensorsWriter writer(file, {{"outer.x", DType::f32, {2}}, {"outer.mask", DType::f32, {2}}});
    writer.write("outer.x", value);
    writer.write("outer.mask", value);
    writer.finish();
  }
  const KeyNames inner = [](std::string_view key) -> std::optional<std::string> {
    if (key.ends_with(".mask")) return std::nullopt;
    return std::string(key.substr(std::string_view("outer.").size()));
  };
  CheckpointReader reader(safetensors_to_checkpoint(file, dir.file("ckpt"), 0, {}, inner));
  EXPECT_EQ(reader.names(), (std::vector<std::string>{"x"}));
  const Tensor back = Tensor::empty({2});
  reader.read_box("x", {{0}, {2}}, back);
  EXPECT_EQ(back.to_vector(), value.to_vector());
}

TEST(CheckpointConvert, ImportsBf16AsF32) {
  ScratchDir dir;
  const std::string file = dir.file("bf16.safetensors");
  const Tensor value = Tensor::from_vector(std::vector<float>{1.0f / 3.0f, -2.0f, 1e-3f}, {3});
  {
    SafetensorsWriter writer(file, {{"x", DType::bf16, {3}}});
    writer.write("x", value);
    writer.finish();
  }
  CheckpointReader reader(safetensors_to_checkpoint(file, dir.file("ckpt"), 0, {}));
  const Tensor back = Tensor::empty({3});
  reader.read_box("x", {{0}, {3}}, back);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(back.to_vector()[i], to_f32(to_bf16(value.to_vector()[i])));
}

}  // namespace
}  // namespace meshtrain::testing
