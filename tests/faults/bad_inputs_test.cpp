// Bad inputs the meshtrain binary refuses before it trains: each exits non-zero with a message
// naming the problem, and no step runs. (tests/apps/cli_test.cpp covers zero model sizes and
// --init with size flags.)
#include <filesystem>
#include <string>

#include "tests/faults/fault_test.h"

namespace meshtrain::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

struct BadInput {
  const char* name;
  std::string flags;  // "{dir}" stands for the test's scratch folder
  std::string message;
  std::string env_name = "", env_value = "";
  const char* data = "tokens.bin";  // in the scratch folder
};

std::string with_dir(std::string text, const std::string& dir) {
  for (size_t at; (at = text.find("{dir}")) != std::string::npos;) text.replace(at, 5, dir);
  return text;
}

BadInput bad_fault(const char* name, const std::string& value) {
  return {name, "", "MESHTRAIN_FAULT '" + value + "': expected RANK:STEP:ACTION",
          "MESHTRAIN_FAULT", value};
}

const BadInput kBadInputs[] = {
    {"BatchPastInt32", "--batch 2147483648", "--batch 2147483648 is out of range"},
    {"BatchPast2To62", "--batch 4611686018427387904", "--batch 4611686018427387904 is out of range"},
    // Far past any machine's memory (about 24 TiB for the local backend's 20000 ranks): refused
    // by the estimate before a thread starts.
    {"WorldPastMemory", "--world 20000 --batch 2000000 --seq 64 --vocab 50304",
     "the run needs at least"},
    {"NegativeSeed", "--seed -1", "--seed: expected a non-negative integer, got -1"},
    {"InfiniteLr", "--lr inf", "lr must be finite"},
    {"NanLr", "--lr nan", "lr must be finite"},
    {"SaveIntoMissingFolder", "--save {dir}/missing/model.safetensors",
     "--save: the folder '{dir}/missing' does not exist"},
    {"SaveOntoDirectory", "--save {dir}", "--save '{dir}' is a directory"},
    {"SaveEmpty", "--save ''", "--save: expected a path, got ''"},
    {"MetricsEmpty", "--metrics ''", "--metrics: expected a path, got ''"},
    {"DataShorterThanOneStep", "", "holds 10 tokens, fewer than one step reads", "", "",
     "short.bin"},
    {"LocalBackendUnderMpirun", "", "running under mpirun with 2 processes but --backend local",
     "OMPI_COMM_WORLD_SIZE", "2"},
    bad_fault("FaultWithoutAction", "1:3"),
    bad_fault("FaultRankNotANumber", "x:3:raise"),
    bad_fault("FaultNegativeRank", "-1:3:raise"),
    bad_fault("FaultStepZero", "1:0:raise"),
    bad_fault("FaultUnknownAction", "1:3:explode"),
    bad_fault("FaultTrailingField", "1:3:raise:now"),
    {"TimeoutZero", "--timeout 0", "--timeout: expected a positive integer, got 0"},
    {"TimeoutNegative", "--timeout -1", "--timeout: expected a positive integer, got -1"},
};

class FaultsBadInput : public FaultTest, public ::testing::WithParamInterface<BadInput> {};

TEST_P(FaultsBadInput, IsRefusedWithItsMessage) {
  const BadInput& input = GetParam();
  const std::string short_data = dir_.file("short.bin");
  write_token_file(short_data, tokens_from_text("ten tokens", 256));
  const std::string dir = std::filesystem::path(short_data).parent_path().string();
  // No --timeout, --batch or --seq here: some rows set them.
  const std::string command = cli() + " train --data " + quoted(dir_.file(input.data)) +
                              " --model demo --steps 2 --sample 0 " +
                              with_dir(input.flags, dir);
  JobOptions options;
  if (!input.env_name.empty()) options.env = {{input.env_name, input.env_value}};
  const JobResult job = run_job(dir_, command, options);
  ASSERT_FALSE(job.hung);
  EXPECT_NE(job.exit_code, 0);
  EXPECT_THAT(job.err, HasSubstr(with_dir(input.message, dir)));
  EXPECT_THAT(job.out, Not(HasSubstr("step ")));
}

INSTANTIATE_TEST_SUITE_P(Table, FaultsBadInput, ::testing::ValuesIn(kBadInputs),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace meshtrain::testing
