// A checkpoint written on one mesh loads on another, bit for bit, each rank reading about its
// own share.
#include <gtest/gtest.h>

#include <tuple>

#include "meshtrain/checkpoint/checkpoint_reader.h"
#include "meshtrain/core/error.h"
#include "tests/checkpoint/checkpoint_test_support.h"
#include "tests/support/scratch_dir.h"

namespace meshtrain::testing {
namespace {

class Reshard : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(Reshard, LoadsBitForBitOnAnotherMesh) {
  const auto& [written_on, read_on] = GetParam();
  ScratchDir dir;
  const auto tensors = gpt2_like_tensors();
  const std::string path = save_on(written_on, dir.file("ckpt"), 5, tensors, chunks_of(28));
  EXPECT_EQ(path, dir.file("ckpt/step-00000005"));
  CheckpointReader reader(path);
  EXPECT_EQ(reader.step(), 5);
  EXPECT_EQ(reader.world(), parse_mesh_spec(written_on).size());
  EXPECT_EQ(reader.metadata(), (nlohmann::json{{"mesh", written_on}}));
  EXPECT_EQ(reader.names().size(), tensors.size());
  EXPECT_TRUE(reader.contains("empty"));
  EXPECT_EQ(reader.global_shape("h.0.attn.c_attn.weight"), (Shape{5, 12}));
  expect_loads_on(read_on, path, tensors);
}

INSTANTIATE_TEST_SUITE_P(
    Meshes, Reshard,
    ::testing::Values(std::tuple{"dp_shard=4", "dp_shard=2"},
                      std::tuple{"dp_shard=3", "dp_shard=4"},
                      std::tuple{"dp_shard=4", "dp_shard=1"},
                      std::tuple{"dp_shard=2,tp=2", "dp_shard=3"},
                      std::tuple{"dp_shard=3", "dp_shard=2,tp=2"}, std::tuple{"tp=2", "tp=3"},
                      std::tuple{"dp_shard=1", "dp_shard=2,tp=3"},
                      std::tuple{"dp_replicate=2,dp_shard=2", "dp_shard=2,tp=2"}),
    [](const auto& info) {
      std::string name = std::get<0>(info.param) + "_to_" + std::get<1>(info.param);
      for (char& c : name)
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      return name;
    });

// On 4 -> 2 each reader reads its half, plus at most the rounding of each stored slice it touches
// to whole CRC chunks at both ends.
TEST(Reshard, EachRankReadsAboutItsShare) {
  ScratchDir dir;
  const std::vector<TestTensor> tensors = {{"w", {30, 10}, {{"dp_shard", Shard(0)}}, 1.0f}};
  const uint64_t chunk = 64;
  const std::string path = save_on("dp_shard=4", dir.file("ckpt"), 1, tensors, chunks_of(chunk));
  const std::vector<uint64_t> bytes = expect_loads_on("dp_shard=2", path, tensors);
  const uint64_t share = 15 * 10 * 4;
  for (uint64_t b : bytes) {
    EXPECT_GE(b, share);
    EXPECT_LE(b, share + 2 * 2 * chunk);  // two stored slices touched, each rounded at both ends
  }
  // Rows 8..14 of the second writer's slice are 280 bytes, rounded up to 320.
  EXPECT_EQ(bytes[0], 8 * 40 + 320u);
}

// A box inside one stored slice touches only the chunks under it.
TEST(Reshard, ReadBoxReadsOnlyTheChunksItNeeds) {
  ScratchDir dir;
  const std::vector<TestTensor> tensors = {{"w", {16, 16}, {}, 0.0f}};
  const std::string path = save_on("dp_shard=1", dir.file("ckpt"), 1, tensors, chunks_of(64));
  CheckpointReader reader(path);
  const Tensor out = Tensor::empty({2, 3});
  reader.read_box("w", {{5, 4}, {2, 3}}, out);
  EXPECT_EQ(out.to_vector(), (std::vector<float>{21.0f, 21.25f, 21.5f, 25.0f, 25.25f, 25.5f}));
  EXPECT_EQ(reader.bytes_read(), 2 * 64u);  // rows 5 and 6 lie in chunks 5 and 6, one each
}

}  // namespace
}  // namespace meshtrain::testing
