// Llama through the binary from Hugging Face files written by another tool: a folder with
// transformers' config.json and model.safetensors loads by --init FOLDER and trains on a mesh, and
// converts to a checkpoint and back with equal tensors and config; the same model sharded over two
// files beside model.safetensors.index.json trains and converts exactly as the one file does; what
// meshtrain's Llama does not model, a config that disagrees with the tensors and a missing tensor
// are refused naming them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "meshtrain/models/safetensors.h"
#include "meshtrain/models/token_file.h"
#include "tests/apps/apps_test_support.h"
#include "tests/support/safetensors_shards.h"

namespace meshtrain {
namespace {

using testing::CliResult;
using ::testing::HasSubstr;
using testing::ScratchDir;
using testing::tensors_of;

// A byte-level Llama: V=256, d=16, ffn=24, one block, 2 query heads over 1 key/value head.
const nlohmann::json kConfig = {{"architectures", {"LlamaForCausalLM"}},
                                {"model_type", "llama"},
                                {"vocab_size", 256},
                                {"hidden_size", 16},
                                {"intermediate_size", 24},
                                {"num_hidden_layers", 1},
                                {"num_attention_heads", 2},
                                {"num_key_value_heads", 1},
                                {"max_position_embeddings", 64},
                                {"rms_norm_eps", 1e-6},
                                {"rope_theta", 10000.0},
                                {"rope_scaling", nullptr},
                                {"hidden_act", "silu"},
                                {"tie_word_embeddings", false},
                                {"bos_token_id", 1},
                                {"torch_dtype", "float32"},
                                {"transformers_version", "4.46.0"}};

const std::vector<SafetensorsSpec> kTensors = {
    {"model.embed_tokens.weight", DType::f32, {256, 16}},
    {"model.layers.0.input_layernorm.weight", DType::f32, {16}},
    {"model.layers.0.self_attn.q_proj.weight", DType::f32, {16, 16}},
    {"model.layers.0.self_attn.k_proj.weight", DType::f32, {8, 16}},
    {"model.layers.0.self_attn.v_proj.weight", DType::f32, {8, 16}},
    {"model.layers.0.self_attn.o_proj.weight", DType::f32, {16, 16}},
    {"model.layers.0.post_attention_layernorm.weight", DType::f32, {16}},
    {"model.layers.0.mlp.gate_proj.weight", DType::f32, {24, 16}},
    {"model.layers.0.mlp.up_proj.weight", DType::f32, {24, 16}},
    {"model.layers.0.mlp.down_proj.weight", DType::f32, {16, 24}},
    {"model.norm.weight", DType::f32, {16}},
    {"lm_head.weight", DType::f32, {256, 16}}};

// The folder as transformers' save_pretrained lays it out, with known values; `skip` leaves one
// tensor out.
void write_folder(const ScratchDir& dir, const std::string& folder, const nlohmann::json& config,
                  const std::string& skip = "") {
  std::filesystem::create_directories(dir.file(folder));
  testing::write_text(dir.file(folder + "/config.json"), config.dump(2));
  std::vector<SafetensorsSpec> specs;
  for (const SafetensorsSpec& s : kTensors)
    if (s.name != skip) specs.push_back(s);
  SafetensorsWriter writer(dir.file(folder + "/model.safetensors"), specs, {{"format", "pt"}});
  for (const SafetensorsSpec& s : specs) {
    std::vector<float> values(static_cast<size_t>(shape_numel(s.shape)));
    for (size_t i = 0; i < values.size(); ++i)
      values[i] =
          s.shape.size() == 1
              ? 1.0f + 0.01f * static_cast<float>(i % 7)
              : 0.05f * std::sin(0.37f * static_cast<float>(i) + static_cast<float>(s.name.size()));
    writer.write(s.name, Tensor::from_vector(values, s.shape));
  }
  writer.finish();
}

class LlamaFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    tokens_ = dir_.file("tokens.bin");
    write_token_file(tokens_, testing::tokens_from_text(testing::sample_prose(10), 256));
  }
  CliResult run(const std::string& args) const {
    return testing::run_cli(MESHTRAIN_CLI, dir_, args);
  }
  std::string train(const std::string& init) const {
    return "train --init '" + dir_.file(init) + "' --data '" + tokens_ +
           "' --batch 4 --seq 16 --steps 2 --sample 0";
  }
  ScratchDir dir_;
  std::string tokens_;
};

TEST_F(LlamaFiles, AFolderFromAnotherToolLoadsTrainsAndConvertsBack) {
  write_folder(dir_, "hf", kConfig);
  const std::string hf = dir_.file("hf/model.safetensors");

  // Into a checkpoint and back out to a Hugging Face folder.
  CliResult r = run("convert '" + dir_.file("hf") + "' '" + dir_.file("ckpt") + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::filesystem::create_directories(dir_.file("out"));
  r = run("convert '" + dir_.file("ckpt") + "' '" + dir_.file("out/model.safetensors") + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(tensors_of(dir_.file("out/model.safetensors")), tensors_of(hf));
  const nlohmann::json exported =
      nlohmann::json::parse(testing::read_text(dir_.file("out/config.json")));
  for (const char* key :
       {"model_type", "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
        "num_attention_heads", "num_key_value_heads", "max_position_embeddings", "rms_norm_eps",
        "rope_theta", "tie_word_embeddings", "hidden_act", "rope_scaling"})
    EXPECT_EQ(exported.at(key), kConfig.at(key)) << key;

  std::filesystem::create_directories(dir_.file("trained"));
  r = run(train("hf") + " --world 2 --mesh dp_shard=2 --save '" +
          dir_.file("trained/model.safetensors") + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("Llama V=256 T=64 d=16 ffn=24 L=1 H=2 KV=1"));
  const auto trained = tensors_of(dir_.file("trained/model.safetensors"));
  EXPECT_EQ(trained.size(), kTensors.size());
  EXPECT_NE(trained.at("lm_head.weight"), tensors_of(hf).at("lm_head.weight")) << "it trained";
  EXPECT_EQ(nlohmann::json::parse(testing::read_text(dir_.file("trained/config.json"))), exported);
}

// The losses of each step of a run's --metrics file.
std::vector<double> losses_of(const std::string& metrics) {
  std::vector<double> losses;
  for (const std::string& line : testing::read_lines(metrics))
    losses.push_back(nlohmann::json::parse(line).at("loss").get<double>());
  return losses;
}

TEST_F(LlamaFiles, ShardedWeightsTrainAndConvertAsTheOneFileDoes) {
  write_folder(dir_, "hf", kConfig);
  const std::string hf = dir_.file("hf/model.safetensors");
  testing::write_sharded(hf, dir_.file("sharded"), 2);
  std::filesystem::copy_file(dir_.file("hf/config.json"), dir_.file("sharded/config.json"));
  ASSERT_FALSE(std::filesystem::exists(dir_.file("sharded/model.safetensors")));

  // From the one file, the sharded folder and its index itself, as --init takes each.
  const std::map<std::string, std::string> inits = {
      {"one", "hf"}, {"folder", "sharded"}, {"index", "sharded/model.safetensors.index.json"}};
  std::map<std::string, std::vector<double>> losses;
  for (const auto& [run_name, init] : inits) {
    std::filesystem::create_directories(dir_.file("trained_" + run_name));
    const CliResult r = run(train(init) + " --world 2 --mesh dp_shard=2 --metrics '" +
                            dir_.file(run_name + ".jsonl") + "' --save '" +
                            dir_.file("trained_" + run_name + "/model.safetensors") + "'");
    ASSERT_EQ(r.exit_code, 0) << init << ": " << r.err;
    losses[run_name] = losses_of(dir_.file(run_name + ".jsonl"));
  }
  ASSERT_EQ(losses["one"].size(), 2u);
  EXPECT_EQ(losses["folder"], losses["one"]);
  EXPECT_EQ(losses["index"], losses["one"]);
  EXPECT_EQ(tensors_of(dir_.file("trained_folder/model.safetensors")),
            tensors_of(dir_.file("trained_one/model.safetensors")));

  CliResult r = run("convert '" + dir_.file("sharded") + "' '" + dir_.file("ckpt") + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::filesystem::create_directories(dir_.file("out"));
  r = run("convert '" + dir_.file("ckpt") + "' '" + dir_.file("out/model.safetensors") + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(tensors_of(dir_.file("out/model.safetensors")), tensors_of(hf));

  // A shard gone is named, not taken for a smaller model.
  std::filesystem::remove(dir_.file("sharded/model-00002-of-00002.safetensors"));
  r = run(train("sharded"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("there is no file '" +
                               dir_.file("sharded/model-00002-of-00002.safetensors") + "'"));
}

TEST_F(LlamaFiles, RefusesWhatItDoesNotModelNamingIt) {
  nlohmann::json config = kConfig;
  config["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 32.0}};
  write_folder(dir_, "scaled", config);
  CliResult r = run(train("scaled/model.safetensors"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("rope_scaling {\"factor\":32.0,\"rope_type\":\"llama3\"} is not "
                               "supported"));

  config = kConfig;
  config["hidden_size"] = 32;
  write_folder(dir_, "wide", config);
  r = run(train("wide/model.safetensors"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("gives dim 32, but '" + dir_.file("wide/model.safetensors") +
                               "' holds model.embed_tokens.weight of shape [256, 16]"));

  write_folder(dir_, "partial", kConfig, "model.layers.0.mlp.up_proj.weight");
  r = run(train("partial/model.safetensors"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("has no key for parameter 'model.layers.0.mlp.up_proj.weight'"));

  std::filesystem::create_directories(dir_.file("bad_index"));
  testing::write_text(dir_.file("bad_index/config.json"), kConfig.dump());
  testing::write_text(dir_.file("bad_index/model.safetensors.index.json"), "{}");
  r = run(train("bad_index"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(
      r.err, HasSubstr("safetensors index '" + dir_.file("bad_index/model.safetensors.index.json") +
                       "': expected a JSON object with a \"weight_map\" object"));

  write_folder(dir_, "bare", kConfig);
  std::filesystem::remove(dir_.file("bare/config.json"));
  r = run(train("bare/model.safetensors"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("there is no config.json beside it"));
}

}  // namespace
}  // namespace meshtrain
