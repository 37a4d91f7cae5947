// SafetensorsSet: a model's weights in one file or sharded over several beside an index, as
// transformers saves them; the shards read equal to the one file, and an index that does not
// describe its shards is refused naming the file and the key.
#include "meshtrain/models/safetensors_set.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "meshtrain/core/error.h"
#include "meshtrain/models/builtin_models.h"
#include "meshtrain/models/checkpoint.h"
#include "meshtrain/models/gpt2.h"
#include "meshtrain/models/hf_config_path.h"
#include "meshtrain/models/model_registry.h"
#include "tests/support/error_message.h"
#include "tests/support/safetensors_shards.h"
#include "tests/support/scratch_dir.h"

namespace meshtrain {
namespace {

using testing::expect_error;

class SafetensorsSetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SafetensorsWriter writer(file_,
                             {{"a", DType::f32, {2, 3}},
                              {"b", DType::bf16, {3}},
                              {"c", DType::f32, {4}},
                              {"e", DType::f32, {0, 2}}},
                             {{"format", "pt"}});
    writer.write("a", Tensor::from_vector(std::vector<float>{1, -2, 3, 4.5f, 5, 6}, {2, 3}));
    writer.write("b", Tensor::from_vector(std::vector<float>{0.5f, 0.25f, -8}, {3}));
    writer.write("c", Tensor::from_vector(std::vector<float>{7, 8, 9, 10}, {4}));
    writer.write("e", Tensor::empty({0, 2}));
    writer.finish();
    index_ = testing::write_sharded(file_, dir_.file("sharded"), 2);
  }
  std::string shard(int i) const {
    return dir_.file("sharded/model-0000" + std::to_string(i) + "-of-00002.safetensors");
  }
  // Rewrites the index's weight_map with `change` applied.
  template <typename Change>
  void edit_weight_map(Change&& change) const {
    nlohmann::json index = nlohmann::json::parse(std::ifstream(index_));
    change(index["weight_map"]);
    std::ofstream(index_) << index.dump();
  }
  void write_index(const std::string& text) const { std::ofstream(index_) << text; }

  testing::ScratchDir dir_;
  std::string file_ = dir_.file("model.safetensors");
  std::string index_;
};

TEST_F(SafetensorsSetTest, ShardsReadEqualToTheOneFile) {
  SafetensorsSet one(file_), sharded(index_);
  ASSERT_EQ(sharded.entries().size(), 4u);
  EXPECT_EQ(SafetensorsReader(shard(1)).entries().size(), 2u) << "split between the two shards";
  for (size_t i = 0; i < one.entries().size(); ++i) {
    const SafetensorsEntry &a = one.entries()[i], &b = sharded.entries()[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.dtype, b.dtype) << a.name;
    EXPECT_EQ(a.shape, b.shape) << a.name;
    Tensor from_one = Tensor::empty(a.shape), from_shards = Tensor::empty(a.shape);
    one.read(a.name, from_one);
    sharded.read(b.name, from_shards);
    EXPECT_EQ(from_one.to_vector(), from_shards.to_vector()) << a.name;
  }
  EXPECT_EQ(sharded.metadata(), one.metadata());
  EXPECT_EQ(sharded.find("c")->shape, (Shape{4}));
  EXPECT_EQ(sharded.find("zz"), nullptr);
  Tensor slice = Tensor::empty({2}, DType::bf16);  // a dim-0 shard's slice, converted
  sharded.read("a", slice, 3);
  EXPECT_EQ(slice.to_vector(), (std::vector<float>{4.5f, 5}));
  EXPECT_THROW(sharded.read("zz", Tensor::empty({1})), InvalidArgument);
  EXPECT_THROW(sharded.read("c", Tensor::empty({2}), 3), InvalidArgument);
}

TEST_F(SafetensorsSetTest, AFolderGivesItsIndexWhenItHasNoSingleFile) {
  const std::string folder = dir_.file("sharded");
  std::ofstream(folder + "/config.json") << "{}";
  EXPECT_EQ(hf_weights_path(folder), index_);
  SafetensorsWriter writer(folder + "/model.safetensors", {});
  writer.finish();
  EXPECT_EQ(hf_weights_path(folder), folder + "/model.safetensors") << "as transformers prefers";
  std::filesystem::remove(folder + "/model.safetensors");
  std::filesystem::remove(index_);
  expect_error<InvalidArgument>([&] { hf_weights_path(folder); }, folder,
                                "neither a model.safetensors nor a sharded "
                                "model.safetensors.index.json");
}

TEST_F(SafetensorsSetTest, RefusesAnIndexThatIsNotJsonOrHasNoWeightMap) {
  write_index("{\"weight_map\": {");
  expect_error<IoError>([&] { SafetensorsSet s(index_); }, index_, "not valid JSON");
  write_index(R"({"metadata": {"total_size": 8}})");
  expect_error<IoError>([&] { SafetensorsSet s(index_); }, index_, "\"weight_map\" object");
  write_index(R"({"weight_map": []})");
  expect_error<IoError>([&] { SafetensorsSet s(index_); }, index_, "\"weight_map\" object");
  write_index(R"({"weight_map": {}})");
  expect_error<IoError>([&] { SafetensorsSet s(index_); }, index_, "names no tensors");
  write_index(R"({"weight_map": {"a": )" + std::string(100, '[') + std::string(100, ']') + "}}");
  expect_error<IoError>([&] { SafetensorsSet s(index_); }, index_, "nested deeper than 16");
  expect_error<IoError>([&] { SafetensorsSet s(dir_.file("absent.json")); },
                        "cannot open safetensors index", "absent.json");
}

TEST_F(SafetensorsSetTest, RefusesAShardNameOutsideTheFolder) {
  std::filesystem::copy_file(shard(1), dir_.file("model-00001-of-00002.safetensors"));
  for (const std::string& outside :
       {std::string("../model-00001-of-00002.safetensors"),
        dir_.file("model-00001-of-00002.safetensors"), std::string(".."), std::string("")}) {
    edit_weight_map([&](nlohmann::json& map) { map["a"] = outside; });
    expect_error<IoError>([&] { SafetensorsSet s(index_); }, index_, "weight_map[\"a\"]",
                          nlohmann::json(outside).dump() + " is not a plain file name");
  }
  edit_weight_map([](nlohmann::json& map) { map["a"] = 3; });
  expect_error<IoError>([&] { SafetensorsSet s(index_); }, index_, "weight_map[\"a\"]",
                        "expected a shard file name, got 3");
  edit_weight_map([](nlohmann::json& map) { map["a"] = "pytorch_model-00001-of-00002.bin"; });
  expect_error<IoError>([&] { SafetensorsSet s(index_); }, index_,
                        "'pytorch_model-00001-of-00002.bin' is not a .safetensors file");
}

TEST_F(SafetensorsSetTest, RefusesAMissingShardNamingIt) {
  std::filesystem::remove(shard(2));
  expect_error<IoError>([&] { SafetensorsSet s(index_); }, index_,
                        "in 'model-00002-of-00002.safetensors', but there is no file '" + shard(2));
}

TEST_F(SafetensorsSetTest, RefusesTensorsNotWhereTheIndexSays) {
  const std::string first = "model-00001-of-00002.safetensors";
  const std::string second = "model-00002-of-00002.safetensors";
  ASSERT_NE(SafetensorsReader(shard(1)).find("a"), nullptr);
  edit_weight_map([&](nlohmann::json& map) { map["zz"] = first; });
  expect_error<IoError>(
      [&] { SafetensorsSet s(index_); }, index_,
      "weight_map puts tensor 'zz' in '" + first + "', which holds no such tensor");
  edit_weight_map([&](nlohmann::json& map) {
    map.erase("zz");
    map.erase("a");
  });
  expect_error<IoError>(
      [&] { SafetensorsSet s(index_); }, index_,
      "shard '" + first + "' holds tensor 'a', which its weight_map does not name");
  edit_weight_map([&](nlohmann::json& map) { map["a"] = second; });
  expect_error<IoError>(
      [&] { SafetensorsSet s(index_); }, index_,
      "shard '" + first + "' holds tensor 'a', which its weight_map puts in '" + second + "'");
}

TEST_F(SafetensorsSetTest, RefusesShardsWhoseMetadataDisagrees) {
  SafetensorsWriter writer(shard(2), {{"b", DType::bf16, {3}}, {"e", DType::f32, {0, 2}}},
                           {{"format", "tf"}});
  writer.write("b", Tensor::zeros({3}));
  writer.write("e", Tensor::empty({0, 2}));
  writer.finish();
  expect_error<IoError>([&] { SafetensorsSet s(index_); }, index_, "metadata 'format'",
                        "('pt' and 'tf')");
}

// A GPT-2 folder as transformers shards it: the registry reads its configuration through the
// index and the config.json beside it, and the parameters load equal to the ones saved.
TEST(ShardedGpt2, AFolderLoads) {
  testing::ScratchDir dir;
  GPT2 saved(gpt2_preset("tiny"), {.seed = 5});
  save_parameters(saved.parameters(), dir.file("model.safetensors"));
  const std::string folder = dir.file("hf");
  testing::write_sharded(dir.file("model.safetensors"), folder, 2);
  std::ofstream(folder + "/config.json") << R"({"model_type": "gpt2", "n_head": 4})";

  const std::string weights = hf_weights_path(folder);
  EXPECT_EQ(builtin_models().from_safetensors(weights)->describe(), "GPT-2 V=64 T=16 d=32 L=2 H=4");
  GPT2 loaded(gpt2_preset("tiny"), {.seed = 6});
  load_parameters(loaded.parameters(), weights);
  for (size_t i = 0; i < saved.parameters().size(); ++i)
    EXPECT_EQ(loaded.parameters()[i]->value().to_vector(),
              saved.parameters()[i]->value().to_vector())
        << saved.parameters()[i]->name();
}

}  // namespace
}  // namespace meshtrain
