// The command line as a library (meshtrain/cli/command_line.h), run in this process with a
// registry that holds a plugin of the tests' own: --axis-plugins and a --config file's
// [mesh] axis_plugins bind it by name, the run equals one rank's, --print-config writes the
// binding back, and a binding the registry or the mesh cannot serve is an error saying so.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "meshtrain/cli/command_line.h"
#include "meshtrain/models/builtin_models.h"
#include "tests/apps/apps_test_support.h"
#include "tests/support/ddp_plugin.h"

namespace meshtrain {
namespace {

using ::testing::HasSubstr;
using testing::ScratchDir;

struct Outcome {
  int exit_code;
  std::string out, err;
};

class CommandLine : public ::testing::Test {
 protected:
  void SetUp() override {
    tokens_ = dir_.file("tokens.bin");
    write_token_file(tokens_, testing::tokens_from_text(testing::sample_prose(20), 64));
  }
  // `meshtrain <args>` with this program's registries: the built-in families, the plugins and ddp.
  Outcome run(const std::vector<std::string>& args) {
    const Registries registries{builtin_models(), *testing::plugins_with_ddp()};
    std::vector<const char*> argv{"meshtrain"};
    for (const std::string& arg : args) argv.push_back(arg.c_str());
    ::testing::internal::CaptureStdout();
    ::testing::internal::CaptureStderr();
    const int code = run_command_line(static_cast<int>(argv.size()), argv.data(), registries);
    std::string out = ::testing::internal::GetCapturedStdout();
    return {code, out, ::testing::internal::GetCapturedStderr()};
  }
  // A tiny run's flags, its metrics written to `metrics`.
  std::vector<std::string> train(const std::string& metrics) {
    return {"train",  "--model", "tiny", "--data", tokens_, "--steps", "4", "--batch", "4",
            "--seq",  "16",      "--lr", "1e-3",   "--sample", "0",    "--quiet",  "--metrics",
            dir_.file(metrics)};
  }
  std::vector<double> losses(const std::string& metrics) {
    std::vector<double> out;
    for (const std::string& line : testing::read_lines(dir_.file(metrics)))
      out.push_back(nlohmann::json::parse(line).at("loss").get<double>());
    return out;
  }
  std::string write(const std::string& name, const std::string& text) {
    testing::write_text(dir_.file(name), text);
    return dir_.file(name);
  }
  static std::vector<std::string> plus(std::vector<std::string> args,
                                       const std::vector<std::string>& more) {
    args.insert(args.end(), more.begin(), more.end());
    return args;
  }

  ScratchDir dir_;
  std::string tokens_;
};

TEST_F(CommandLine, AProgramsPluginTrainsFromFlagsAndFromAConfigFile) {
  Outcome r = run(plus(train("one.jsonl"), {"--world", "1"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run(plus(train("flags.jsonl"), {"--world", "4", "--mesh", "dp_replicate=2,tp=2",
                                      "--axis-plugins", "dp_replicate=ddp"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<double> one = losses("one.jsonl"), flags = losses("flags.jsonl");
  ASSERT_EQ(one.size(), 4u);
  ASSERT_EQ(flags.size(), 4u);
  for (size_t s = 0; s < one.size(); ++s) EXPECT_NEAR(flags[s], one[s], 1e-5 * one[s]) << s;

  const std::string file =
      write("ddp.toml", "[mesh]\nworld = 4\nlayout = \"dp_replicate=2,tp=2\"\n"
                        "axis_plugins = \"dp_replicate=ddp\"\n");
  r = run(plus(train("file.jsonl"), {"--config", file}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(losses("file.jsonl"), flags);
}

TEST_F(CommandLine, PrintConfigWritesTheBindingBack) {
  Outcome r = run(plus(train("unused.jsonl"), {"--world", "4", "--mesh", "dp_replicate=2,tp=2",
                                               "--axis-plugins", "dp_replicate=ddp",
                                               "--print-config"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("layout = \"dp_replicate=2,tp=2\"\naxis_plugins = "
                               "\"dp_replicate=ddp\"\n"));
  const std::string printed = r.out;
  r = run({"train", "--config", write("printed.toml", printed), "--print-config"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, printed);
}

TEST_F(CommandLine, BindingsTheRegistryOrTheMeshCannotServeAreErrors) {
  const auto refusal = [&](const std::string& mesh, const std::string& bindings) {
    const Outcome r = run(plus(train("unused.jsonl"),
                               {"--world", "4", "--mesh", mesh, "--axis-plugins", bindings}));
    EXPECT_EQ(r.exit_code, 1) << bindings;
    return r.err;
  };
  EXPECT_THAT(refusal("dp_replicate=2,tp=2", "dp_replicate"),
              HasSubstr("--axis-plugins: expected AXIS=PLUGIN items separated by commas, such as "
                        "dp_replicate=ddp; got 'dp_replicate' in 'dp_replicate'"));
  EXPECT_THAT(refusal("dp_replicate=2,tp=2", "tp=tp,tp=ddp"),
              HasSubstr("--axis-plugins binds axis 'tp' twice in 'tp=tp,tp=ddp'"));
  EXPECT_THAT(refusal("dp_replicate=2,tp=2", "dp_replicate=dpp"),
              HasSubstr("unknown strategy 'dpp'; known strategies: ddp, fsdp, pp, tp"));
  EXPECT_THAT(refusal("dp_shard=4", "dp_replicate=ddp"),
              HasSubstr("plugin 'ddp' is bound to axis 'dp_replicate', which the mesh "
                        "dp_shard=4 does not have"));
}

TEST_F(CommandLine, InfoListsTheProgramsPlugins) {
  const Outcome r = run({"info"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("  plugins:\n    ddp (replicated data parallelism)\n    fsdp ("));
}

}  // namespace
}  // namespace meshtrain
