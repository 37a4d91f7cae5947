// `meshtrain generate`: text from a checkpoint written on any mesh, or from an export, through the
// model's key/value-cache decoder on one rank. From a 3D checkpoint (W=8), from its export and at
// the end of the training run itself, the same seed gives the same text; a model whose vocabulary
// is not bytes takes and prints token ids; bad input is refused naming it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "tests/apps/apps_test_support.h"

namespace meshtrain {
namespace {

using ::testing::HasSubstr;
using testing::CliResult;
using testing::ScratchDir;

CliResult run_cli(const ScratchDir& dir, const std::string& args) {
  return testing::run_cli(MESHTRAIN_CLI, dir, args);
}

// The text a train run printed after "sample:\n" (up to the newline that ends the report).
std::string printed_sample(const std::string& out) {
  const size_t at = out.find("sample:\n");
  EXPECT_NE(at, std::string::npos) << out;
  if (at == std::string::npos) return "";
  const size_t begin = at + 8, end = out.rfind('\n');
  return end > begin ? out.substr(begin, end - begin) : "";
}

class Generate : public ::testing::Test {
 protected:
  void SetUp() override {
    tokens_ = dir_.file("tokens.bin");
    write_token_file(tokens_, testing::tokens_from_text(testing::sample_prose(10), 256));
  }
  // A few steps of a small byte-level model of `family` in 3D (pp 2 x dp_shard 2 x tp 2), with a
  // checkpoint, an export and a 48-byte sample at the end; returns the sample.
  std::string train_in_3d(const std::string& family) {
    const std::string model = family == "llama"
                                  ? "--family llama --vocab 256 --ctx 32 --dim 32 --ffn-dim 48 "
                                    "--layers 2 --heads 4 --kv-heads 2"
                                  : "--family gpt2 --vocab 256 --ctx 32 --dim 32 --layers 2 --heads 4";
    std::filesystem::create_directories(dir_.file("export"));
    const CliResult r = run_cli(
        dir_, "train --data '" + tokens_ + "' " + model +
                  " --world 8 --mesh pp=2,dp_shard=2,tp=2 --microbatches 2 --batch 8 --seq 16 "
                  "--steps 6 --sample 48 --checkpoint-dir '" + dir_.file("ckpt") + "' --save '" +
                  dir_.file("export") + "/model.safetensors'");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return printed_sample(r.out);
  }
  ScratchDir dir_;
  std::string tokens_;
};

TEST_F(Generate, FromA3dCheckpointItsExportAndTheTrainingSampleAlike) {
  for (const char* family : {"gpt2", "llama"}) {
    SCOPED_TRACE(family);
    const std::string sample = train_in_3d(family);
    ASSERT_EQ(sample.size(), 48u);
    for (const std::string& from : {dir_.file("ckpt"), dir_.file("export")}) {
      const CliResult r = run_cli(dir_, "generate --from '" + from + "' --tokens 48");
      ASSERT_EQ(r.exit_code, 0) << r.err;
      EXPECT_EQ(r.out, "\n" + sample + "\n") << from;  // the prompt, then the text
      EXPECT_THAT(r.err, HasSubstr("generating 48 tokens with"));
    }
    // Another seed, another text; a prompt is echoed before its continuation.
    const CliResult other = run_cli(dir_, "generate --from '" + dir_.file("ckpt") +
                                              "' --tokens 48 --seed 7 --prompt 'The '");
    ASSERT_EQ(other.exit_code, 0) << other.err;
    EXPECT_EQ(other.out.rfind("The ", 0), 0u);
    EXPECT_NE(other.out.substr(4), sample + "\n");
    std::filesystem::remove_all(dir_.file("ckpt"));
    std::filesystem::remove_all(dir_.file("export"));
  }
}

TEST_F(Generate, AModelOfAnotherVocabularyTakesAndPrintsTokenIds) {
  const std::string exported = dir_.file("model.safetensors");
  CliResult r = run_cli(dir_, "train --data '" + tokens_ +
                                  "' --family gpt2 --vocab 300 --ctx 16 --dim 16 --layers 1 "
                                  "--heads 2 --batch 4 --seq 8 --steps 1 --save '" + exported + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;

  r = run_cli(dir_, "generate --from '" + exported + "' --prompt hello");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("a vocabulary of 300 tokens, not bytes"));
  EXPECT_THAT(r.err, HasSubstr("--prompt-ids"));

  r = run_cli(dir_, "generate --from '" + exported + "' --prompt-ids 299,0,7 --tokens 5");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream ids(r.out);
  std::vector<int> got{std::istream_iterator<int>(ids), std::istream_iterator<int>()};
  ASSERT_EQ(got.size(), 8u) << r.out;
  EXPECT_EQ(got[0], 299);
  for (int id : got) EXPECT_TRUE(id >= 0 && id < 300) << id;

  r = run_cli(dir_, "generate --from '" + exported + "' --prompt-ids 1,x");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("--prompt-ids: expected token ids separated by commas"));
  r = run_cli(dir_, "generate --from '" + exported + "' --prompt-ids 300");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("prompt token 300 outside the vocabulary [0, 300)"));
}

TEST_F(Generate, RefusesBadSettingsNamingThem) {
  const std::string empty = dir_.file("empty");
  std::filesystem::create_directories(empty);
  CliResult r = run_cli(dir_, "generate --from '" + empty + "'");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr(empty));
  r = run_cli(dir_, "generate --from '" + dir_.file("nope") + "'");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("nope"));
  r = run_cli(dir_, "generate --from '" + empty + "' --tokens -1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("--tokens: expected a non-negative integer, got -1"));
  r = run_cli(dir_, "generate --from '" + empty + "' --prompt a --prompt-ids 1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("excludes"));
}

}  // namespace
}  // namespace meshtrain
