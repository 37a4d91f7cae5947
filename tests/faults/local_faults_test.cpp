// Faults on the local backend (ranks as threads of one process), through the meshtrain binary: a
// rank that raises aborts the in-process world and the run ends at once with that rank's error,
// once; a disk that fills fails --save and leaves the previous file; SIGTERM and SIGINT end the
// process. Nothing half-written ever sits under a final name, and the last checkpoint resumes.
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>

#include "tests/faults/fault_test.h"

namespace meshtrain::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class FaultsLocal : public FaultTest {
 protected:
  void rank_raises(int world) {
    const JobResult job = run_job(
        dir_,
        train("--world " + std::to_string(world) + " --steps 4 --checkpoint-dir " + quoted(ckpt_) +
              " --checkpoint-every 1 --save " + quoted(save_)),
        {.env = {{"MESHTRAIN_FAULT", "1:3:raise"}}});
    ASSERT_FALSE(job.hung) << job.err;
    EXPECT_EQ(job.exit_code, 1);
    EXPECT_LT(job.seconds, kBound);
    EXPECT_THAT(meshtrain_error_lines(job.err),
                ElementsAre("meshtrain: error: injected fault (MESHTRAIN_FAULT) on rank 1 before "
                            "step 3"));
    EXPECT_FALSE(std::filesystem::exists(save_));
    expect_resumes_from(2);
  }
};

TEST_F(FaultsLocal, RankRaisesInAWorldOf2) { rank_raises(2); }
TEST_F(FaultsLocal, RankRaisesInAWorldOf3) { rank_raises(3); }

// MESHTRAIN_FAULT full limits the file size (the whole process here: every rank is a thread of
// it), so the model file cannot be written; the previous one stays whole.
TEST_F(FaultsLocal, DiskFullFailsSaveAndKeepsThePreviousFile) {
  write_text(save_, "the previous model");
  const JobResult job = run_job(dir_, train("--world 2 --steps 4 --save " + quoted(save_)),
                                {.env = {{"MESHTRAIN_FAULT", "0:3:full"}}});
  ASSERT_FALSE(job.hung) << job.err;
  EXPECT_EQ(job.exit_code, 1);
  EXPECT_LT(job.seconds, kBound);
  const std::vector<std::string> errors = meshtrain_error_lines(job.err);
  ASSERT_EQ(errors.size(), 1u) << job.err;
  EXPECT_THAT(errors[0], HasSubstr(save_ + ".partial"));
  EXPECT_THAT(errors[0], HasSubstr(std::strerror(EFBIG))) << "the cause: the disk is full";
  EXPECT_EQ(read_text(save_), "the previous model");
  EXPECT_FALSE(std::filesystem::exists(save_ + ".partial"));
}

// Ctrl-Z, then fg past --timeout: the whole process was stopped, every rank alike, so none was
// late, and the run goes on to its end (it used to die with a false timeout).
TEST_F(FaultsLocal, AStoppedAndContinuedRunGoesOn) {
  JobOptions options = sending(SIGSTOP);
  options.continue_after = std::chrono::seconds(kTimeout + 2);
  const JobResult job = run_job(
      dir_, train("--world 2 --steps 100 --checkpoint-dir " + quoted(ckpt_) + " --checkpoint-every 1"),
      options);
  ASSERT_TRUE(job.signalled) << "no checkpoint before the deadline\n" << job.out << job.err;
  ASSERT_FALSE(job.hung) << job.err;
  EXPECT_EQ(job.exit_code, 0) << job.err;
  EXPECT_GE(job.seconds, kTimeout + 2.0) << "ended before it was continued";
  EXPECT_EQ(newest_complete_step(ckpt_), 100);
}

// Threads that cannot be created (here: a 2.5 GB address-space limit against 2000 ranks' 8 MiB
// stacks) end the run with an error naming what could not start, once, after the ranks already
// running have been aborted; it used to end in std::terminate (exit 134).
TEST_F(FaultsLocal, RanksThatCannotStartEndTheRunWithAnError) {
  const std::string tokens = dir_.file("tiny_tokens.bin");
  write_token_file(tokens, tokens_from_text(sample_prose(200), 64));
  const std::string command = cli() + " train --data " + quoted(tokens) +
                              " --model tiny --world 2000 --batch 2000 --seq 8 --steps 1" +
                              " --sample 0 --timeout " + std::to_string(kTimeout);
  const JobResult job = run_job(dir_, "sh -c " + quoted("ulimit -v 2500000 && exec " + command));
  ASSERT_FALSE(job.hung) << job.err;
  EXPECT_EQ(job.exit_code, 1) << job.err;
  const std::vector<std::string> errors = meshtrain_error_lines(job.err);
  ASSERT_EQ(errors.size(), 1u) << job.err;
  EXPECT_THAT(errors[0], HasSubstr("could not start"));
}

TEST_F(FaultsLocal, SigtermEndsTheRun) {
  expect_ended_by_signal(run_job(dir_, train("--world 2 " + long_run_flags()), sending(SIGTERM)));
}

TEST_F(FaultsLocal, SigintEndsTheRun) {
  expect_ended_by_signal(run_job(dir_, train("--world 2 " + long_run_flags()), sending(SIGINT)));
}

}  // namespace
}  // namespace meshtrain::testing
