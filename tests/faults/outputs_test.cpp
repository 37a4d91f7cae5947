// Outputs that must not destroy what they should not (docs/failures.md, "Outputs"): an output
// that is an input is refused naming both; outputs open only once the run starts; non-regular
// targets are refused and partial files are created fresh; every write is checked; one run per
// checkpoint folder.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/faults/fault_test.h"

namespace meshtrain::testing {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

class FaultsOutputs : public FaultTest {
 protected:
  // A run that must be refused: exit 1, no step trained, the message on stderr.
  void expect_refused(const std::string& command, const std::string& message) {
    const JobResult job = run_job(dir_, command);
    ASSERT_FALSE(job.hung) << job.err;
    EXPECT_EQ(job.exit_code, 1) << job.out << job.err;
    EXPECT_THAT(job.err, HasSubstr(message));
    EXPECT_THAT(job.out, ::testing::Not(HasSubstr("step ")));
  }

  // `script` run by sh (for ulimit, or a job in the background).
  static std::string shell(const std::string& script) { return "sh -c " + quoted(script); }

  const std::string metrics_ = dir_.file("metrics.jsonl");
};

bool is_fifo(const std::string& path) {
  struct stat status {};
  return ::lstat(path.c_str(), &status) == 0 && S_ISFIFO(status.st_mode);
}

// A rerun refused because the checkpoint folder is ahead of it (it forgot --resume) leaves the
// metrics of the run before as they were.
TEST_F(FaultsOutputs, RefusedRerunKeepsTheMetricsOfTheRunBefore) {
  const std::string flags = "--steps 2 --checkpoint-dir " + quoted(ckpt_) +
                            " --checkpoint-every 1 --metrics " + quoted(metrics_);
  const JobResult first = run_job(dir_, train(flags));
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const std::string logged = read_text(metrics_);
  ASSERT_FALSE(logged.empty());
  expect_refused(train(flags), "already holds " + ckpt_ + "/step-00000002, past step 0");
  EXPECT_EQ(read_text(metrics_), logged);
}

TEST_F(FaultsOutputs, MetricsOrSaveNamingTheDataAreRefused) {
  const std::string data = read_text(tokens_);
  expect_refused(train("--steps 1 --metrics " + quoted(tokens_)),
                 "--metrics '" + tokens_ + "' is the --data file '" + tokens_ + "'");
  const std::string link = dir_.file("link.bin");  // the same file by another name
  fs::create_symlink(tokens_, link);
  expect_refused(train("--steps 1 --save " + quoted(link)),
                 "--save '" + link + "' is the --data file '" + tokens_ + "'");
  EXPECT_TRUE(read_text(tokens_) == data) << "the data file changed";
  EXPECT_TRUE(fs::is_symlink(link));
}

TEST_F(FaultsOutputs, PrepareOntoItsOwnInputIsRefused) {
  const std::string text = dir_.file("text.txt");
  write_text(text, "some text");
  expect_refused(cli() + " prepare " + quoted(text) + " " + quoted(text),
                 "the token file '" + text + "' is the text file '" + text + "'");
  EXPECT_TRUE(read_text(text) == "some text") << "the text file changed";
}

TEST_F(FaultsOutputs, ConvertIntoTheCheckpointsOwnShardIsRefused) {
  const JobResult run = run_job(dir_, train("--steps 1 --checkpoint-dir " + quoted(ckpt_)));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string step = ckpt_ + "/step-00000001", shard = step + "/rank-00000.safetensors";
  expect_refused(cli() + " convert " + quoted(step) + " " + quoted(shard),
                 "the output '" + shard + "' lies inside the checkpoint '" + step + "'");
  const JobResult exported = run_job(dir_, cli() + " convert " + quoted(ckpt_) + " " +
                                               quoted(save_));
  EXPECT_EQ(exported.exit_code, 0) << "the checkpoint still loads\n" << exported.err;
}

// The atomic rename would replace the FIFO (or, as root, a device node) by a regular file.
TEST_F(FaultsOutputs, SaveOntoAFifoIsRefused) {
  const std::string fifo = dir_.file("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_refused(train("--steps 1 --save " + quoted(fifo)),
                 "--save '" + fifo + "' is a FIFO; expected a regular file to replace, or a new "
                 "path");
  EXPECT_TRUE(is_fifo(fifo));
}

TEST_F(FaultsOutputs, OutputsThroughASymlinkToADeviceAreRefused) {
  const std::string device = dir_.file("device");
  fs::create_symlink("/dev/zero", device);
  for (const char* flag : {"--save", "--metrics"})
    expect_refused(train(std::string("--steps 1 ") + flag + " " + quoted(device)),
                   std::string(flag) + " '" + device + "' is a character device");
  EXPECT_TRUE(fs::is_symlink(device));
}

// A symlink planted at the partial name is removed, never written through.
TEST_F(FaultsOutputs, PlantedPartialSymlinkIsNotWrittenThrough) {
  const std::string victim = dir_.file("victim");
  write_text(victim, "precious");
  fs::create_symlink(victim, save_ + ".partial");
  const JobResult job = run_job(dir_, train("--steps 1 --save " + quoted(save_)));
  ASSERT_EQ(job.exit_code, 0) << job.err;
  EXPECT_TRUE(read_text(victim) == "precious") << "written through the planted symlink";
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(save_)));
  EXPECT_FALSE(fs::exists(fs::symlink_status(save_ + ".partial")));
}

// A metrics write that fails (the disk full at step 2) ends the run naming the file; the resume
// after it drops the torn last line and logs the step again.
TEST_F(FaultsOutputs, MetricsWriteFailureEndsTheRunAndAResumeDropsTheTornLine) {
  const JobResult first = run_job(
      dir_,
      train("--steps 1 --checkpoint-dir " + quoted(ckpt_) + " --metrics " + quoted(metrics_)));
  ASSERT_EQ(first.exit_code, 0) << first.err;
  {  // lines a resume keeps, up to just below the 64 KiB the fault allows
    std::string text = read_text(metrics_);
    while (text.size() < (64 << 10) - 100) text += "# padding to near the file-size limit\n";
    write_text(metrics_, text);
  }
  const std::string resume = "--resume " + quoted(ckpt_) + " --metrics " + quoted(metrics_);
  const JobResult full = run_job(dir_, train("--steps 3 " + resume),
                                 {.env = {{"MESHTRAIN_FAULT", "0:2:full"}}});
  ASSERT_FALSE(full.hung);
  EXPECT_EQ(full.exit_code, 1);
  EXPECT_THAT(meshtrain_error_lines(full.err),
              ::testing::ElementsAre("meshtrain: error: writing the metrics file '" + metrics_ +
                                     "' failed: " + std::strerror(EFBIG)));
  ASSERT_NE(read_text(metrics_).back(), '\n') << "the failed write tore the last line";

  const JobResult resumed = run_job(dir_, train("--steps 2 " + resume));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  const std::string text = read_text(metrics_);
  EXPECT_EQ(text.back(), '\n');
  std::vector<int64_t> steps;
  for (const std::string& line : read_lines(metrics_)) {
    if (line.starts_with("# padding")) continue;
    steps.push_back(nlohmann::json::parse(line).at("step").get<int64_t>());  // no torn line
  }
  EXPECT_EQ(steps, (std::vector<int64_t>{1, 2}));
}

// Two runs on one checkpoint folder: the second is refused naming the first, which goes on.
TEST_F(FaultsOutputs, SecondRunOnACheckpointFolderIsRefusedNamingTheFirst) {
  const std::string first_out = dir_.file("first.out");
  const std::string flags = "--world 2 --checkpoint-dir " + quoted(ckpt_) + " --checkpoint-every 1";
  const JobResult job = run_job(
      dir_, shell(train("--steps 100000 " + flags) + " >" + quoted(first_out) + " 2>&1 & " +
                  "first=$!; while kill -0 $first && ! grep -q '^checkpoint ' " +
                  quoted(first_out) + "; do sleep 0.05; done; echo first $first; " +
                  train("--steps 1 " + flags) + "; echo second exit $?; kill $first; wait"));
  ASSERT_FALSE(job.hung) << job.err;
  const size_t at = job.out.find("first ");
  ASSERT_NE(at, std::string::npos) << job.out;
  const std::string pid = job.out.substr(at + 6, job.out.find('\n', at) - at - 6);
  EXPECT_THAT(job.out, HasSubstr("second exit 1"));
  EXPECT_THAT(job.err, HasSubstr("the checkpoint folder '" + ckpt_ +
                                 "' is in use by another run (pid " + pid + " on "));
  EXPECT_GE(newest_complete_step(ckpt_), 1);
  expect_resumes_from(newest_complete_step(ckpt_));
}

// A convert that fails (a file-size limit here) leaves no partial checkpoint behind.
TEST_F(FaultsOutputs, FailedConvertLeavesNoPartial) {
  const JobResult run = run_job(dir_, train("--steps 1 --save " + quoted(save_)));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string imported = dir_.file("imported");
  const JobResult job = run_job(
      dir_, shell("ulimit -f 1 && exec " + cli() + " convert " + quoted(save_) + " " +
                  quoted(imported)));
  EXPECT_EQ(job.exit_code, 1);
  EXPECT_THAT(job.err, HasSubstr(std::strerror(EFBIG)));
  EXPECT_TRUE(entries_of(imported).empty());
}

// prepare reads a chunk at a time into a partial file: a text without end (/dev/zero) and a disk
// that fills (a 1 MiB file-size limit) fail at once, and the token file there stays as it was.
TEST_F(FaultsOutputs, PrepareOfAnEndlessTextFailsAndKeepsTheTokenFile) {
  const std::string before = read_text(tokens_);
  const JobResult job = run_job(
      dir_, shell("ulimit -v 2000000 && ulimit -f 2048 && exec " + cli() + " prepare /dev/zero " +
                  quoted(tokens_)));
  ASSERT_FALSE(job.hung);
  EXPECT_EQ(job.exit_code, 1);
  EXPECT_THAT(job.err, HasSubstr("writing token file '" + tokens_ + ".partial' failed: " +
                                 std::strerror(EFBIG)));
  EXPECT_TRUE(read_text(tokens_) == before) << "the token file changed";
  EXPECT_FALSE(fs::exists(tokens_ + ".partial"));
}

}  // namespace
}  // namespace meshtrain::testing
