// meshtrain train --config: the shipped demo file trains bit for bit as the demo's flags do, flags
// override the file, --print-config writes a file that reproduces itself, and a bad file is an
// error naming the key and its line.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "meshtrain/models/token_file.h"
#include "tests/apps/apps_test_support.h"

namespace meshtrain {
namespace {

using ::testing::HasSubstr;
using testing::CliResult;
using testing::ScratchDir;

class ConfigFile : public ::testing::Test {
 protected:
  void SetUp() override {
    tokens_ = dir_.file("tokens.bin");
    // Long enough for the demo's validation: 8 batches of 16 x 64 in its last tenth.
    write_token_file(tokens_, testing::tokens_from_text(testing::sample_prose(800), 256));
  }
  CliResult run(const std::string& args) { return testing::run_cli(MESHTRAIN_CLI, dir_, args); }
  // The losses and gradient norms of a metrics file, as written.
  std::vector<std::pair<double, double>> figures(const std::string& metrics) {
    std::vector<std::pair<double, double>> out;
    for (const std::string& line : testing::read_lines(metrics)) {
      const nlohmann::json j = nlohmann::json::parse(line);
      out.emplace_back(j.at("loss").get<double>(), j.at("grad_norm").get<double>());
    }
    return out;
  }
  std::string write(const std::string& name, const std::string& text) {
    const std::string path = dir_.file(name);
    testing::write_text(path, text);
    return path;
  }

  ScratchDir dir_;
  std::string tokens_;
};

// The demo's command line (scripts/demo.sh before it took the file) against the file, with the
// same overrides: the same losses and gradient norms, bit for bit.
TEST_F(ConfigFile, DemoFileTrainsAsTheDemoFlags) {
  const std::string overrides =
      " --data '" + tokens_ + "' --steps 3 --sample 0 --quiet --metrics '";
  const std::string flags =
      "train --model demo --world 8 --mesh pp=2,dp_shard=2,tp=2 --pp-schedule 1f1b "
      "--microbatches 4 --fsdp full --sequence-parallel --batch 16 --seq 64 --lr 2e-3 "
      "--warmup 20 --decay-steps 300 --min-lr 2e-4 --clip 1.0 --val-every 50 --val-batches 8";
  CliResult r = run(flags + overrides + dir_.file("flags.jsonl") + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run("train --config '" MESHTRAIN_SOURCE_DIR "/configs/demo.toml'" + overrides +
          dir_.file("file.jsonl") + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto from_flags = figures(dir_.file("flags.jsonl"));
  EXPECT_EQ(from_flags.size(), 3u);  // --steps 3 overrides the file's 300
  EXPECT_EQ(figures(dir_.file("file.jsonl")), from_flags);
}

// --print-config of a run with model flags and plugin options is a file whose --print-config is
// itself, and flags given beside --config override it.
TEST_F(ConfigFile, PrintConfigRoundTrips) {
  CliResult r = run("train --data '" + tokens_ +
                    "' --model tiny --layers 3 --world 4 --mesh dp_shard=2,tp=2 --fsdp grad_op "
                    "--sequence-parallel --lr 1.234567e-5 --clip 0.5 --steps 7 --batch 4 --seq 8 "
                    "--val-data '" +
                    tokens_ + "' --val-every 3 --val-batches 2 --print-config");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string printed = r.out;
  EXPECT_THAT(printed, HasSubstr("[model]\nfamily = \"gpt2\"\nvocab = 64\nctx = 16\ndim = 32\n"
                                 "layers = 3\nheads = 4\n"));
  EXPECT_THAT(printed, HasSubstr("lr = 1.234567e-05\n"));
  EXPECT_THAT(printed, HasSubstr("[fsdp]\nmode = \"grad_op\"\n"));
  EXPECT_THAT(printed, HasSubstr("[tp]\nsequence_parallel = true\n"));
  EXPECT_THAT(printed,
              HasSubstr("[validation]\ndata = \"" + tokens_ + "\"\nevery = 3\nbatches = 2\n"));
  const std::string file = write("run.toml", printed);
  r = run("train --config '" + file + "' --print-config");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, printed);
  r = run("train --config '" + file + "' --steps 9 --fsdp full --print-config");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("steps = 9\n"));
  EXPECT_THAT(r.out, HasSubstr("[fsdp]\nmode = \"full\"\n"));
}

// A model's real option that no float equals, such as a subnormal rms_norm_eps (std::stod threw
// std::out_of_range on it; as a float it printed as 0.0), prints in a double's digits and the
// printed file reads back as itself.
TEST_F(ConfigFile, PrintConfigKeepsADoubleNoFloatEquals) {
  const std::string flags = "train --data '" + tokens_ + "' --print-config --config '";
  const std::string file = write("eps.toml",
                                 "[model]\nfamily = \"llama\"\nvocab = 256\nctx = 64\ndim = 32\n"
                                 "ffn_dim = 64\nlayers = 2\nheads = 4\nkv_heads = 2\n"
                                 "rms_norm_eps = 1e-310\n");
  CliResult r = run(flags + file + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("rms_norm_eps = 1e-310\n"));
  const std::string printed = r.out;
  r = run(flags + write("printed.toml", printed) + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, printed);
}

TEST_F(ConfigFile, BadFilesNameTheKeyAndTheLine) {
  const auto refusal = [&](const std::string& text) {
    const std::string file = write("bad.toml", text);
    const CliResult r = run("train --data '" + tokens_ + "' --config '" + file + "'");
    EXPECT_EQ(r.exit_code, 1) << text;
    return r.err;
  };
  const std::string at = "--config '" + dir_.file("bad.toml") + "' line ";
  EXPECT_THAT(refusal("[training]\nsteps = 3\nstepz = 4\n"),
              HasSubstr(at + "3: unknown key 'stepz' in [training]; known: steps, batch, seq"));
  EXPECT_THAT(
      refusal("\n[trainig]\nsteps = 3\n"),
      HasSubstr(at + "2: unknown section [trainig]; known: model, data, validation, training"));
  EXPECT_THAT(refusal("[training]\nsteps = \"ten\"\n"),
              HasSubstr(at + "2: [training] steps (--steps) must be an integer"));
  EXPECT_THAT(refusal("[tp]\nsequence_parallel = 1\n"),
              HasSubstr(at + "2: [tp] sequence_parallel (--sequence-parallel) must be true or false"));
  EXPECT_THAT(refusal("[model]\nlayers = 2.5\n"),
              HasSubstr(at + "2: [model] layers (--layers) must be an integer"));
  EXPECT_THAT(refusal("[training]\nsteps = = 3\n"), HasSubstr(at + "2: "));
  EXPECT_THAT(refusal("[mesh]\nthreads = 0\n"),
              HasSubstr(at + "2: [mesh] threads: --threads: expected a positive integer, got 0"));
  // A value the registry refuses names its flag, as on the command line.
  EXPECT_THAT(refusal("[fsdp]\nmode = \"zero9\"\n"),
              HasSubstr("fsdp option mode (--fsdp) expects one of full, grad_op, none or hybrid"));
}

}  // namespace
}  // namespace meshtrain
