// The meshtrain binary: bad flags exit non-zero with a message on stderr; prepare writes a token
// file; a short train run writes its metrics.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "meshtrain/checkpoint/durable_files.h"
#include "meshtrain/models/safetensors.h"
#include "meshtrain/models/token_file.h"
#include "tests/apps/apps_test_support.h"

namespace meshtrain {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::CliResult;
using testing::ScratchDir;
using testing::tensors_of;

CliResult run_cli(const ScratchDir& dir, const std::string& args) {
  return testing::run_cli(MESHTRAIN_CLI, dir, args);
}

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    text_ = dir_.file("text.txt");
    tokens_ = dir_.file("tokens.bin");
    testing::write_text(text_, testing::sample_prose(10));
    write_token_file(tokens_, testing::tokens_from_text(testing::sample_prose(10), 256));
  }
  ScratchDir dir_;
  std::string text_, tokens_;
};

TEST_F(Cli, MissingDataFlag) {
  const CliResult r = run_cli(dir_, "train --steps 1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("--data"));
  EXPECT_THAT(r.err, HasSubstr("required"));
}

TEST_F(Cli, DataFileThatDoesNotExist) {
  const CliResult r = run_cli(dir_, "train --data '" + dir_.file("nope.bin") + "'");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("nope.bin"));
}

TEST_F(Cli, NonNumericSteps) {
  const CliResult r = run_cli(dir_, "train --data '" + tokens_ + "' --steps many");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("--steps"));
  EXPECT_THAT(r.err, HasSubstr("many"));
}

TEST_F(Cli, UnknownFsdpMode) {
  const CliResult r = run_cli(dir_, "train --data '" + tokens_ + "' --fsdp zero9");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("zero9"));
  EXPECT_EQ(r.out, "");
}

// The plugin flags come from the plugins' declarations: named there (--fsdp) or after the plugin
// and option (--fsdp-blocks-per-unit), with their choices and defaults, each reaching its plugin.
TEST_F(Cli, PluginFlagsComeFromThePluginsDeclarations) {
  const CliResult help = run_cli(dir_, "train --help");
  ASSERT_EQ(help.exit_code, 0) << help.err;
  EXPECT_THAT(help.out, HasSubstr("--fsdp full|grad_op|none|hybrid"));
  EXPECT_THAT(help.out, HasSubstr("FSDP mode (default full)"));
  EXPECT_THAT(help.out, HasSubstr("--fsdp-blocks-per-unit"));
  EXPECT_THAT(help.out, HasSubstr("--pp-schedule"));
  EXPECT_THAT(help.out, HasSubstr("--sequence-parallel"));
  const CliResult r = run_cli(dir_, "train --data '" + tokens_ + "' --fsdp-blocks-per-unit 0");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("fsdp option blocks_per_unit (--fsdp-blocks-per-unit) expects an "
                               "integer of at least 1, got '0'"));
}

TEST_F(Cli, UnknownPreset) {
  const CliResult r = run_cli(dir_, "train --data '" + tokens_ + "' --model gpt5");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("meshtrain: error:"));
  EXPECT_THAT(r.err, HasSubstr("'gpt5'"));
  EXPECT_THAT(r.err, HasSubstr("demo"));  // lists the known presets
}

TEST_F(Cli, BatchNotDivisibleByWorld) {
  const CliResult r =
      run_cli(dir_, "train --data '" + tokens_ + "' --world 3 --batch 8 --steps 1 --quiet");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("meshtrain: error:"));
  EXPECT_THAT(r.err, HasSubstr("--batch must divide by the data-parallel degree 3"));
}

// The model flags come from the family's declarations, checked by the registry.
TEST_F(Cli, ModelSizesMustBePositive) {
  for (const std::string option : {"heads", "dim", "vocab", "layers", "ctx"}) {
    const CliResult r =
        run_cli(dir_, "train --data '" + tokens_ + "' --" + option + " 0 --steps 1 --quiet");
    EXPECT_EQ(r.exit_code, 1) << option;
    EXPECT_THAT(r.err, HasSubstr("gpt2 option " + option + " (--" + option +
                                 ") expects an integer of at least 1, got '0'"));
  }
}

TEST_F(Cli, SampleMustNotBeNegative) {
  const CliResult r = run_cli(dir_, "train --data '" + tokens_ + "' --sample -5 --steps 1 --quiet");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("--sample: expected a non-negative integer, got -5"));
}

// Llama has a decoder too: --sample prints text after a Llama run as after a GPT-2 one.
TEST_F(Cli, LlamaRunPrintsASample) {
  const CliResult r = run_cli(dir_, "train --data '" + tokens_ +
                                        "' --model llama-demo --batch 2 --seq 16 --steps 1 "
                                        "--sample 16");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("sample:\n"));
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("no sample")));
}

// --save records the head count: --init takes the model from the file, head count included; a
// model flag that disagrees with the file, or a preset, is refused (a Hugging Face file, which
// records no head count, needs --heads).
TEST_F(Cli, InitTakesTheModelFromASavedFile) {
  const std::string saved = dir_.file("saved.safetensors");
  const std::string common = "train --data '" + tokens_ + "' --batch 4 --seq 16 --steps 1 --sample 0";
  CliResult r = run_cli(dir_, common + " --heads 2 --save '" + saved + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(SafetensorsReader(saved).metadata().at("heads"), "2");
  r = run_cli(dir_, common + " --init '" + saved + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("H=2"));
  r = run_cli(dir_, common + " --init '" + saved + "' --heads 2 --dim 128");  // as the file says
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = run_cli(dir_, common + " --init '" + saved + "' --heads 4");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--heads 4 disagrees with '" + saved + "', which holds heads 2"));
  r = run_cli(dir_, common + " --init '" + saved + "' --dim 64");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--dim 64 disagrees with '" + saved + "', which holds dim 128"));
  r = run_cli(dir_, common + " --init '" + saved + "' --model gpt2");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--init takes the model from '" + saved + "'; drop --model"));
}

TEST_F(Cli, UnknownSubcommandAndNoSubcommand) {
  EXPECT_NE(run_cli(dir_, "").exit_code, 0);
  EXPECT_NE(run_cli(dir_, "fly").exit_code, 0);
}

TEST_F(Cli, PrepareWritesByteTokens) {
  const std::string out_tokens = dir_.file("prepared.bin");
  testing::write_text(text_, "Hello, mesh!\n\xff");
  const CliResult r = run_cli(dir_, "prepare '" + text_ + "' '" + out_tokens + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("wrote 14 tokens"));
  const TokenFile file = read_token_file(out_tokens);
  const std::vector<Token> expected{'H', 'e', 'l', 'l', 'o', ',',  ' ',
                                    'm', 'e', 's', 'h', '!', '\n', 255};
  EXPECT_EQ(file.tokens, expected);
  EXPECT_EQ(file.format, TokenFormat::gpt2);  // the default
  // llm.c header: 256 int32, then the tokens as uint16.
  EXPECT_EQ(testing::read_text(out_tokens).size(), 256 * 4 + 14 * 2);
}

// --format llama-3 writes llm.c's llama-3 header (magic 20240801, version 7) and uint32 tokens,
// and training reads the file.
TEST_F(Cli, PrepareWritesLlama3TokensThatTrainingReads) {
  const std::string out_tokens = dir_.file("prepared.bin");
  const CliResult r =
      run_cli(dir_, "prepare --format llama-3 '" + text_ + "' '" + out_tokens + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string text = testing::sample_prose(10);
  EXPECT_THAT(r.out, HasSubstr("wrote " + std::to_string(text.size()) + " tokens"));
  EXPECT_THAT(r.out, HasSubstr("llama-3"));
  const std::string bytes = testing::read_text(out_tokens);
  ASSERT_EQ(bytes.size(), 256 * 4 + text.size() * 4);
  int32_t header[3];
  std::memcpy(header, bytes.data(), sizeof header);
  EXPECT_EQ(header[0], 20240801);
  EXPECT_EQ(header[1], 7);
  EXPECT_EQ(header[2], static_cast<int32_t>(text.size()));
  EXPECT_EQ(read_token_file(out_tokens).tokens, testing::tokens_from_text(text, 256));
  const CliResult trained = run_cli(dir_, "train --data '" + out_tokens +
                                              "' --model demo --steps 2 --batch 2 --seq 16"
                                              " --sample 0");
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  EXPECT_THAT(trained.out, HasSubstr("done: loss"));
}

TEST_F(Cli, PrepareRefusesAnUnknownFormat) {
  const std::string out_tokens = dir_.file("prepared.bin");
  const CliResult r = run_cli(dir_, "prepare --format gpt-3 '" + text_ + "' '" + out_tokens + "'");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("--format"));
  EXPECT_THAT(r.err, HasSubstr("'gpt-3'"));
  EXPECT_THAT(r.err, HasSubstr("expected gpt-2"));
  EXPECT_THAT(r.err, HasSubstr("or llama-3"));
  EXPECT_FALSE(std::filesystem::exists(out_tokens));
}

TEST_F(Cli, PrepareMissingInput) {
  const CliResult r =
      run_cli(dir_, "prepare '" + dir_.file("absent.txt") + "' '" + dir_.file("x.bin") + "'");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("absent.txt"));
}

TEST_F(Cli, ShortTrainRunWritesMetrics) {
  const std::string metrics = dir_.file("metrics.jsonl");
  const CliResult r = run_cli(dir_, "train --data '" + tokens_ +
                                        "' --model demo --steps 3 --batch 4 --seq 16 --world 2"
                                        " --sample 0 --metrics '" + metrics + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("mesh dp_shard=2"));
  EXPECT_THAT(r.out, HasSubstr("done: loss"));
  // Not a terminal: plain lines, one per report, no carriage returns or escape codes.
  EXPECT_EQ(r.out.find('\r'), std::string::npos);
  EXPECT_EQ(r.out.find('\033'), std::string::npos);
  const std::vector<std::string> lines = testing::read_lines(metrics);
  ASSERT_EQ(lines.size(), 3u);
  for (size_t i = 0; i < lines.size(); ++i)
    EXPECT_EQ(nlohmann::json::parse(lines[i])["step"].get<int64_t>(), static_cast<int64_t>(i + 1));
}

// The checkpoint workflow through the binary: train with checkpoints, resume on another mesh
// (the model comes from the checkpoint), convert the newest step to one Hugging Face file (the
// same parameters --save writes) and back, and start a new run from the converted checkpoint.
TEST_F(Cli, CheckpointResumeAndConvert) {
  const std::string ckpt = dir_.file("ckpt"), saved = dir_.file("saved.safetensors");
  const std::string common = "train --data '" + tokens_ + "' --model demo --batch 4 --seq 16 --sample 0";
  CliResult r = run_cli(dir_, common + " --steps 2 --world 2 --checkpoint-dir '" + ckpt + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("checkpoint " + ckpt + "/step-00000002"));
  r = run_cli(dir_, "train --data '" + tokens_ + "' --batch 4 --seq 16 --sample 0 --steps 4 "
                    "--world 4 --mesh dp_shard=2,tp=2 --resume '" + ckpt + "' --save '" + saved + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("resumed from " + ckpt + "/step-00000002 at step 2"));
  EXPECT_THAT(r.out, HasSubstr("in 2 steps"));

  const std::string resumed_ckpt = dir_.file("ckpt2");
  r = run_cli(dir_, common + " --steps 4 --world 4 --mesh dp_shard=2,tp=2 --resume '" + ckpt +
                        "' --checkpoint-dir '" + resumed_ckpt + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string exported = dir_.file("exported.safetensors");
  r = run_cli(dir_, "convert '" + resumed_ckpt + "' '" + exported + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(tensors_of(exported), tensors_of(saved)) << "convert and --save write the same model";
  EXPECT_EQ(SafetensorsReader(exported).metadata().at("format"), "pt");
  EXPECT_EQ(SafetensorsReader(exported).metadata().at("heads"), "4") << "as --save writes it";

  const std::string imported = dir_.file("imported");
  r = run_cli(dir_, "convert '" + exported + "' '" + imported + "'");  // heads from the file
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_cli(dir_, "train --data '" + tokens_ + "' --batch 4 --seq 16 --sample 0 --steps 1 "
                    "--init '" + imported + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_cli(dir_, common + " --steps 4 --dim 32 --resume '" + ckpt + "'");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("this run's has dim 32"));
}

// `saved` (a --save output) as Hugging Face names a GPT-2's tensors: under "transformer.", with
// each block's attention-mask buffers, and no head count in the metadata.
void write_hugging_face_style(const std::string& saved, const std::string& hf) {
  SafetensorsReader reader(saved);
  const Shape mask{1, 1, 16, 16};
  std::vector<SafetensorsSpec> specs;
  for (const SafetensorsEntry& e : reader.entries()) {
    specs.push_back({"transformer." + e.name, DType::f32, e.shape});
    if (e.name.ends_with(".attn.c_attn.weight")) {
      const std::string block =
          e.name.substr(0, e.name.size() - std::string("c_attn.weight").size());
      specs.push_back({"transformer." + block + "bias", DType::f32, mask});
      specs.push_back({"transformer." + block + "masked_bias", DType::f32, {}});
    }
  }
  SafetensorsWriter writer(hf, specs);
  for (const SafetensorsSpec& spec : specs) {
    Tensor value = Tensor::zeros(spec.shape);
    const std::string name = spec.name.substr(std::string("transformer.").size());
    if (reader.find(name)) reader.read(name, value);
    writer.write(spec.name, value);
  }
  writer.finish();
}

double first_loss(const std::string& metrics) {
  return nlohmann::json::parse(testing::read_lines(metrics).at(0))["loss"].get<double>();
}

// convert stores a Hugging Face file as --init CHECKPOINT reads it (the model's names, no mask
// buffers): a run from the converted checkpoint starts from the same weights as --init FILE.
TEST_F(Cli, ConvertImportsAHuggingFaceFile) {
  const std::string saved = dir_.file("saved.safetensors");
  std::filesystem::create_directory(dir_.file("hf"));  // a folder without config.json
  const std::string hf = dir_.file("hf/hf.safetensors");
  const std::string common =
      "train --data '" + tokens_ + "' --batch 4 --seq 16 --steps 1 --sample 0";
  CliResult r = run_cli(dir_, common + " --save '" + saved + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  write_hugging_face_style(saved, hf);
  const std::string imported = dir_.file("imported");
  r = run_cli(dir_, "convert '" + hf + "' '" + imported + "'");  // the file has no head count
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("the gpt2 model needs heads (--heads)"));
  r = run_cli(dir_, "convert '" + hf + "' '" + imported + "' --heads 4");
  ASSERT_EQ(r.exit_code, 0) << r.err;

  const std::string from_file = dir_.file("file.jsonl"), from_checkpoint = dir_.file("ckpt.jsonl");
  r = run_cli(dir_, common + " --init '" + hf + "' --heads 4 --metrics '" + from_file + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_cli(dir_, common + " --init '" + imported + "' --metrics '" + from_checkpoint + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(first_loss(from_checkpoint), first_loss(from_file));

  // Into a folder that holds a checkpoint already: --init FOLDER would take its newest, so no.
  r = run_cli(dir_, "convert '" + hf + "' '" + imported + "' --heads 4");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("convert: '" + imported + "' already holds checkpoints (newest " +
                               imported + "/step-00000000)"));
}

// --save and convert write transformers' config.json beside the file; with it alone, a Hugging
// Face file (no head count in its metadata) loads without model flags. A config.json that
// disagrees with the tensors, or that an export would replace with another model's, is refused.
TEST_F(Cli, ExportsCarryConfigJson) {
  const std::string common =
      "train --data '" + tokens_ + "' --batch 4 --seq 16 --steps 1 --sample 0";
  const std::string saved = dir_.file("saved.safetensors");
  CliResult r = run_cli(dir_, common + " --heads 2 --save '" + saved + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json config =
      nlohmann::json::parse(testing::read_text(dir_.file("config.json")));
  EXPECT_EQ(config.at("model_type"), "gpt2");
  EXPECT_EQ(config.at("architectures"), nlohmann::json::array({"GPT2LMHeadModel"}));
  EXPECT_EQ(config.at("n_head"), 2);
  EXPECT_EQ(config.at("n_embd"), 128);
  EXPECT_EQ(config.at("vocab_size"), 256);

  std::filesystem::create_directory(dir_.file("hf"));
  const std::string hf = dir_.file("hf/model.safetensors");
  write_hugging_face_style(saved, hf);
  std::filesystem::copy_file(dir_.file("config.json"), dir_.file("hf/config.json"));
  r = run_cli(dir_, common + " --init '" + hf + "'");  // the head count from config.json
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("H=2"));

  nlohmann::json wrong = config;
  wrong["n_embd"] = 64;
  testing::write_text(dir_.file("hf/config.json"), wrong.dump());
  r = run_cli(dir_, common + " --init '" + hf + "'");
  EXPECT_EQ(r.exit_code, 1);
  const std::string hf_config = dir_.file("hf/config.json");
  EXPECT_THAT(r.err, HasSubstr(hf_config + "' gives dim 64, but '" + hf + "' holds dim 128"));
  wrong = config;
  wrong["model_type"] = "llama";
  testing::write_text(dir_.file("hf/config.json"), wrong.dump());
  r = run_cli(dir_, common + " --init '" + hf + "'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("describes a model of type 'llama', but the tensors of '" + hf +
                               "' are GPT-2's"));

  // Another model saved into the folder would replace its config.json: refused before training.
  const std::string other = dir_.file("other.safetensors");
  r = run_cli(dir_, common + " --heads 4 --save '" + other + "'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--save '" + other + "' would replace '" + dir_.file("config.json") +
                               "', which is not this model's configuration"));
  EXPECT_FALSE(std::filesystem::exists(other));
  EXPECT_EQ(nlohmann::json::parse(testing::read_text(dir_.file("config.json"))), config);

  // convert of a checkpoint writes it too.
  const std::string ckpt = dir_.file("ckpt");
  r = run_cli(dir_, common + " --heads 4 --checkpoint-dir '" + ckpt + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::filesystem::create_directory(dir_.file("export"));
  const std::string exported = dir_.file("export/model.safetensors");
  r = run_cli(dir_, "convert '" + ckpt + "' '" + exported + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("wrote its configuration to " + dir_.file("export/config.json")));
  EXPECT_EQ(nlohmann::json::parse(testing::read_text(dir_.file("export/config.json"))).at("n_head"),
            4);
}

// A checkpoint past where a run starts is another run's, or the abandoned steps of the run this
// one restarts from an earlier step: writing beside it is refused, and it stays. A resume from an
// earlier step continues the metrics file from that step, without the abandoned steps' lines.
TEST_F(Cli, RestartFromAnEarlierStep) {
  const std::string ckpt = dir_.file("ckpt"), metrics = dir_.file("metrics.jsonl");
  const std::string common =
      "train --data '" + tokens_ + "' --batch 4 --seq 16 --sample 0 --steps 4";
  CliResult r = run_cli(dir_, common + " --checkpoint-dir '" + ckpt +
                                  "' --checkpoint-every 2 --metrics '" + metrics + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> straight = testing::read_lines(metrics);
  const std::string step2 = ckpt + "/step-00000002";
  for (const std::string& start : {" --resume '" + step2 + "'", std::string(" --seed 7")}) {
    r = run_cli(dir_, common + start + " --checkpoint-dir '" + ckpt + "'");
    EXPECT_EQ(r.exit_code, 1) << start;
    EXPECT_THAT(r.err, HasSubstr("--checkpoint-dir '" + ckpt + "' already holds " + ckpt +
                                 "/step-00000004, past step"));
  }
  EXPECT_EQ(testing::entries_of(ckpt),
            (std::vector<std::string>{".lock", "step-00000002", "step-00000004"}));

  r = run_cli(dir_, common + " --resume '" + step2 + "' --metrics '" + metrics + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> lines = testing::read_lines(metrics);
  ASSERT_EQ(lines.size(), straight.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    const nlohmann::json resumed = nlohmann::json::parse(lines[i]);
    EXPECT_EQ(resumed["step"].get<int64_t>(), static_cast<int64_t>(i + 1));
    EXPECT_EQ(resumed["loss"], nlohmann::json::parse(straight[i])["loss"]) << "step " << i;
  }
}

// --report DIR: the run's report, drawn from the metrics written to DIR/metrics.jsonl (no
// --metrics given); `meshtrain report` draws the same charts after the fact, and names a metrics
// file it cannot read.
TEST_F(Cli, TrainAndReportWriteARunReport) {
  const auto loss_points = [](const std::string& html) {
    const std::string tag = "data-series=\"training loss\"";
    const size_t line = html.find(tag);
    EXPECT_NE(line, std::string::npos);
    EXPECT_EQ(html.find(tag, line + 1), std::string::npos);  // one unbroken line
    const size_t from = html.find("points=\"", line) + 8;
    std::istringstream points(html.substr(from, html.find('"', from) - from));
    size_t n = 0;
    for (std::string point; points >> point;) ++n;
    return n;
  };
  const std::string report = dir_.file("report");
  CliResult r = run_cli(
      dir_, "train --data '" + tokens_ +
                "' --steps 6 --batch 4 --seq 16 --sample 16 --world 2 --report '" + report + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("report " + report + "/index.html"));
  EXPECT_EQ(testing::read_lines(report + "/metrics.jsonl").size(), 6u);
  std::string html = testing::read_text(report + "/index.html");
  EXPECT_EQ(loss_points(html), 6u);
  EXPECT_THAT(html, HasSubstr("<h2>Configuration</h2>"));
  EXPECT_THAT(html, HasSubstr("steps = 6"));
  EXPECT_THAT(html, HasSubstr("dp_shard=2"));
  EXPECT_THAT(html, HasSubstr("<h2>Sample</h2>"));
  EXPECT_THAT(html, Not(HasSubstr("<script")));

  const std::string again = dir_.file("again");
  r = run_cli(dir_, "report '" + report + "/metrics.jsonl' -o '" + again + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(loss_points(testing::read_text(again + "/index.html")), 6u);

  const std::string missing = dir_.file("missing.jsonl");
  r = run_cli(dir_, "report '" + missing + "' -o '" + dir_.file("none") + "'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("cannot open the metrics file '" + missing + "'"));
  EXPECT_FALSE(std::filesystem::exists(dir_.file("none")));
}

// A metadata field of the wrong type is named with its checkpoint.
TEST_F(Cli, MistypedCheckpointMetadataIsNamed) {
  const std::string ckpt = dir_.file("ckpt");
  const std::string common = "train --data '" + tokens_ + "' --batch 4 --seq 16 --sample 0";
  CliResult r = run_cli(dir_, common + " --steps 1 --checkpoint-dir '" + ckpt + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string step = ckpt + "/step-00000001", index = step + "/index.json";
  nlohmann::json json = nlohmann::json::parse(testing::read_text(index));
  json["metadata"]["batch"] = "4";
  testing::write_text(index, json.dump());
  r = run_cli(dir_, common + " --steps 2 --resume '" + ckpt + "'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("checkpoint '" + step +
                               "' (the metadata of a training run): "
                               "'batch' must be a non-negative integer, got \"4\""));
}

// --dry-run needs no data, runs any world size, and refuses what it cannot honour by flag.
TEST_F(Cli, DryRunPrintsMemoryAndTrafficPerRank) {
  CliResult r = run_cli(dir_,
                        "train --dry-run --model llama-tiny --seq 16 --world 8 --mesh "
                        "pp=2,dp_shard=2,tp=2 --grad-accum 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("dry run: "));
  EXPECT_THAT(r.out, HasSubstr("on 8 ranks (pp=2,dp_shard=2,tp=2)"));
  EXPECT_THAT(r.out, HasSubstr("activations"));
  EXPECT_THAT(r.out, HasSubstr("bytes sent per rank in the step"));
  r = run_cli(dir_, "train --dry-run --model llama-tiny --seq 16 --world 2 --save '" +
                        dir_.file("m.safetensors") + "'");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("--dry-run computes nothing"));
  EXPECT_THAT(r.err, HasSubstr("drop --save"));
}

// plan --calibrate measures this machine into a profile and plans with it; --machine-file plans
// with it again, to the same figures.
TEST_F(Cli, PlanCalibratesThisMachineIntoAProfileItReads) {
  const std::string profile = dir_.file("machine.json");
  const std::string layout =
      " --model llama-tiny --seq 16 --world 2 --mesh tp=2 --threads 1 --json";
  const CliResult calibrated = run_cli(dir_, "plan" + layout + " --calibrate '" + profile + "'");
  ASSERT_EQ(calibrated.exit_code, 0) << calibrated.err;
  EXPECT_THAT(calibrated.err, HasSubstr("calibrating: kernels of single-rank steps"));
  EXPECT_THAT(calibrated.err, HasSubstr("kernels fitted"));
  const nlohmann::json planned = nlohmann::json::parse(calibrated.out);
  EXPECT_EQ(planned["machine"], "calibrated (1 thread per rank)");
  EXPECT_GT(planned["step_seconds"].get<double>(), 0.0);

  const CliResult again = run_cli(dir_, "plan" + layout + " --machine-file '" + profile + "'");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(nlohmann::json::parse(again.out)["step_seconds"], planned["step_seconds"]);
  const nlohmann::json written = nlohmann::json::parse(read_small_file(profile));
  EXPECT_TRUE(written["kernels"].contains("linear_forward"));
  EXPECT_TRUE(written["kernels"].contains("grouped_attention_backward"));

  const CliResult both = run_cli(
      dir_, "plan" + layout + " --machine-file '" + profile + "' --calibrate '" + profile + "'");
  EXPECT_NE(both.exit_code, 0);
  EXPECT_THAT(both.err, HasSubstr("not both"));
}

// meshtrain sweep trains every auto layout on 4 local ranks beside its prediction: memory and
// traffic as predicted (the replay's), a step time for each, the table in CSV and JSON.
TEST_F(Cli, SweepMeasuresEveryAutoLayoutAgainstThePlan) {
  const std::string csv = dir_.file("sweep.csv"), json_path = dir_.file("sweep.json");
  const CliResult r =
      run_cli(dir_, "sweep --model demo --data '" + tokens_ +
                        "' --world 4 --batch 8 --seq 16 --steps 3 --rounds 1 --threads 1 "
                        "--csv '" +
                        csv + "' --json '" + json_path + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("on 4 local ranks, 1 thread(s) each"));
  EXPECT_THAT(r.out, HasSubstr("predicted on cpu"));
  EXPECT_THAT(r.out, HasSubstr("--mesh dp_replicate=2,dp_shard=2 --fsdp hybrid"));
  EXPECT_THAT(r.out, HasSubstr("--pp-schedule zb-h1"));
  EXPECT_THAT(r.out, HasSubstr("\nstep time: median |error| "));
  const nlohmann::json json = nlohmann::json::parse(read_small_file(json_path));
  ASSERT_EQ(json["layouts"].size(), 13u);
  for (const nlohmann::json& row : json["layouts"]) {
    EXPECT_GT(row["measured"]["step_s"].get<double>(), 0.0) << row["layout"];
    EXPECT_GT(row["predicted"]["step_s"].get<double>(), 0.0) << row["layout"];
    // What the replay counts exactly: bytes to the byte, and peaks within the staged sends a
    // pipeline's replay leaves out.
    EXPECT_EQ(row["measured"]["sent_bytes"], row["predicted"]["sent_bytes"]) << row["layout"];
    EXPECT_LE(std::abs(row["peak_error"].get<double>()), 0.05) << row["layout"];
  }
  const std::string table = read_small_file(csv);
  EXPECT_EQ(std::count(table.begin(), table.end(), '\n'), 14);
  EXPECT_EQ(table.rfind("layout,measured_step_s,predicted_step_s,step_error,", 0), 0u);

  const CliResult bad = run_cli(
      dir_, "sweep --model tiny --data '" + tokens_ + "' --world 3 --batch 6 --seq 16 --steps 3");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_THAT(bad.err, HasSubstr("an even world of at least 4 ranks, got 3"));
}

// meshtrain sweep --calibrate takes a round of the calibration before each of its rounds and
// predicts on the profile they make, which it writes as plan --calibrate does.
TEST_F(Cli, SweepCalibratesBetweenItsRounds) {
  const std::string layouts = dir_.file("layouts.txt"), profile = dir_.file("machine.json"),
                    json_path = dir_.file("sweep.json");
  write_file_atomically(layouts, "--mesh dp_shard=2 --fsdp full\n");
  const CliResult r =
      run_cli(dir_, "sweep --model demo --data '" + tokens_ +
                        "' --world 2 --batch 4 --seq 16 --steps 3 --rounds 2 "
                        "--threads 1 --layouts '" +
                        layouts + "' --calibrate '" + profile + "' --json '" + json_path + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const size_t first = r.out.find("round 1/2: calibrating"),
               second = r.out.find("round 2/2: calibrating"), wrote = r.out.find("wrote "),
               table = r.out.find("--mesh dp_shard=2 --fsdp full");
  ASSERT_NE(first, std::string::npos) << r.out;
  ASSERT_NE(second, std::string::npos) << r.out;
  EXPECT_LT(first, second);
  EXPECT_LT(second, wrote);
  EXPECT_LT(wrote, table);
  const nlohmann::json json = nlohmann::json::parse(read_small_file(json_path));
  EXPECT_EQ(json["machine"], "calibrated (1 thread per rank)");
  EXPECT_TRUE(
      nlohmann::json::parse(read_small_file(profile))["kernels"].contains("linear_forward"));
}

// meshtrain plan replays each rank alone: without a pipeline its tables are the dry run's line for
// line; it answers for thousands of ranks, checks a device's capacity, prints JSON for scripts,
// and refuses bad layouts by flag.
TEST_F(Cli, PlanPrintsTheDryRunsTablesForAnyWorld) {
  const std::string layout =
      " --model llama-tiny --seq 16 --world 4 --mesh dp_shard=2,tp=2 "
      "--sequence-parallel --ac full";
  const CliResult plan = run_cli(dir_, "plan" + layout);
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  const CliResult dry = run_cli(dir_, "train --dry-run" + layout);
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  const auto tables = [](const std::string& out) {  // the plan's, up to its own lines
    const size_t start = out.find("memory per rank");
    return out.substr(start, out.find("\nfits: ") - start);
  };
  EXPECT_THAT(plan.out, HasSubstr("plan: "));
  EXPECT_THAT(plan.out, HasSubstr("on 4 ranks (dp_shard=2,tp=2 fsdp=full"));
  EXPECT_EQ(tables(plan.out), tables(dry.out));

  CliResult r = run_cli(dir_,
                        "plan --model llama3-70b --world 4096 --mesh pp=8,dp_shard=64,tp=8 "
                        "--batch 512 --seq 4096 --grad-accum 8 --param-dtype bf16 "
                        "--sequence-parallel --device-memory 80");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("on 4096 ranks (pp=8,dp_shard=64,tp=8"));
  EXPECT_THAT(r.out, HasSubstr("\nfits: rank "));
  EXPECT_THAT(r.out, HasSubstr("\nstep time on h100-sxm (predicted"));
  EXPECT_THAT(r.out, HasSubstr("(the slowest): compute "));
  EXPECT_THAT(r.out, HasSubstr("pipeline bubble "));
  EXPECT_THAT(r.out, HasSubstr(" per device; MFU "));
  r = run_cli(dir_,
              "plan" + layout + " --device-memory 0.0001 --svg '" + dir_.file("plan.svg") + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\ndoes not fit: rank "));
  // Each distinct memory a bar, labelled by its ranks.
  EXPECT_THAT(read_small_file(dir_.file("plan.svg")), HasSubstr(">ranks 0-3<"));

  // The same figures for scripts, in bytes.
  r = run_cli(dir_, "plan" + layout + " --device-memory 0.0001 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json json = nlohmann::json::parse(r.out);
  EXPECT_EQ(json["layout"], "dp_shard=2,tp=2 fsdp=full param_dtype=f32 sp ac=full");
  EXPECT_EQ(json["workload"]["seq"], 16);
  EXPECT_FALSE(json["fits"].get<bool>());
  ASSERT_EQ(json["ranks"].size(), 4u);
  const nlohmann::json& last = json["ranks"][3];
  EXPECT_EQ(last["rank"], 3);
  EXPECT_GT(last["memory"]["activations_peak"].get<uint64_t>(), 0u);
  EXPECT_GE(last["memory"]["peak"].get<uint64_t>(),
            last["memory"]["activations_peak"].get<uint64_t>());
  EXPECT_GT(last["sent"]["tp"].get<uint64_t>(), 0u);
  EXPECT_GT(last["sent"]["dp_shard"].get<uint64_t>(), 0u);
  EXPECT_GT(last["time"]["compute"].get<double>(), 0.0);
  EXPECT_GT(last["time"]["exposed_comm"]["tp"].get<double>(), 0.0);
  EXPECT_EQ(json["machine"], "h100-sxm");
  EXPECT_GE(json["step_seconds"].get<double>(), last["time"]["compute"].get<double>());
  EXPECT_GT(json["mfu"].get<double>(), 0.0);
  EXPECT_LT(json["mfu"].get<double>(), 1.0);

  // Another machine: this one's cores, whose kernels are slower than an H100's by orders of
  // magnitude.
  r = run_cli(dir_, "plan" + layout + " --machine cpu --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_GT(nlohmann::json::parse(r.out)["ranks"][3]["time"]["compute"].get<double>(),
            100 * last["time"]["compute"].get<double>());
  // The preset's figures, overridden: a tenth of the f32 peak, links a millionth as fast.
  r = run_cli(dir_, "plan" + layout + " --device-memory 0.0001 --json --peak-tflops-f32 6.7 " +
                        "--intra-node-bandwidth 0.00045 --intra-node-latency 10000");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json slow = nlohmann::json::parse(r.out)["ranks"][3]["time"];
  EXPECT_GT(slow["compute"].get<double>(), 2 * last["time"]["compute"].get<double>());
  EXPECT_GT(slow["exposed_comm"]["tp"].get<double>(),
            1000 * last["time"]["exposed_comm"]["tp"].get<double>());
  r = run_cli(dir_, "plan" + layout + " --intra-node-latency 0");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("--intra-node-latency"));
  r = run_cli(dir_, "plan" + layout + " --machine tpu");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("unknown machine 'tpu'; the presets are h100-sxm"));

  r = run_cli(dir_, "plan" + layout + " --machine-file '" + dir_.file("missing.json") + "'");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("missing.json"));

  r = run_cli(dir_, "plan --model llama-tiny --seq 16 --world 3 --mesh dp_shard=2");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("!= world size 3"));
  r = run_cli(dir_, "plan --model llama-tiny --seq 16 --world 2 --mesh dp_shard=2 --batch 3");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("--batch must divide by the data-parallel degree 2"));
  r = run_cli(dir_, "plan --model llama-tiny --seq 64 --world 2 --mesh dp_shard=2");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("--seq 64 exceeds the model's context length 16"));
}

// Without --mesh, meshtrain plan searches the layouts of --gpus devices: the fastest that fit
// first, the rest with why; it refuses the flags of one layout, which the search chooses.
TEST_F(Cli, PlanWithoutAMeshRanksTheLayouts) {
  const std::string model = " --model llama-tiny --seq 16 --batch 8 --gpus 4";
  CliResult r = run_cli(dir_, "plan" + model + " --top 3");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("on 4 devices of h100-sxm"));
  EXPECT_THAT(r.out, HasSubstr("the 3 fastest of "));
  EXPECT_THAT(r.out, HasSubstr("tokens/s/dev"));

  // Memory of the layouts shown, drawn: a bar each, the device's capacity marked.
  const std::string svg = dir_.file("search.svg");
  r = run_cli(dir_, "plan" + model + " --top 3 --svg '" + svg + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string drawing = read_small_file(svg);
  EXPECT_THAT(drawing, HasSubstr("<svg"));
  EXPECT_THAT(drawing, HasSubstr(">#3 "));
  EXPECT_THAT(drawing, Not(HasSubstr(">#4 ")));
  EXPECT_THAT(drawing, HasSubstr("80.0 GiB per device"));
  EXPECT_THAT(drawing, HasSubstr("activations"));

  r = run_cli(dir_, "plan" + model + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json json = nlohmann::json::parse(r.out);
  EXPECT_EQ(json["devices"], 4);
  const nlohmann::json& fitting = json["fitting"];
  ASSERT_GT(fitting.size(), 10u);
  for (size_t i = 1; i < fitting.size(); ++i)
    EXPECT_GE(fitting[i - 1]["tokens_per_s"].get<double>(),
              fitting[i]["tokens_per_s"].get<double>());
  EXPECT_GT(fitting[0]["memory"]["activations_peak"].get<uint64_t>(), 0u);
  EXPECT_GT(fitting[0]["mfu"].get<double>(), 0.0);

  r = run_cli(dir_, "plan" + model + " --device-memory 0.000001 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json none = nlohmann::json::parse(r.out);
  EXPECT_TRUE(none["fitting"].empty());
  EXPECT_THAT(none["not_fitting"][0]["does_not_fit"].get<std::string>(), HasSubstr("model state "));

  r = run_cli(dir_, "plan" + model + " --pp-schedule zb-h1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("--pp-schedule sets part of one layout, which the search chooses"));
  r = run_cli(dir_, "plan --model llama-tiny --seq 64 --gpus 2");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("sequences of 64 tokens exceed the model's context length 16"));
}

}  // namespace
}  // namespace meshtrain
