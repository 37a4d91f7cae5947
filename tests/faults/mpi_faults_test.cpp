// Faults on the mpi backend, through mpirun and the meshtrain binary, on 2 and 3 ranks. The last
// rank fails (rank 0, which prints the run's output, survives to report), except where only rank
// 0 writes (--save). Every case checks that the whole job ends non-zero within a bound, with all
// its processes; that meshtrain reports the failure once (mpirun's own banners aside), naming the
// failing rank and the cause; that nothing half-written sits under a final name; and, where
// checkpoints were written before the fault, that the last one resumes.
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>

#include "tests/faults/fault_test.h"

namespace meshtrain::testing {
namespace {

using ::testing::ContainsRegex;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::SizeIs;

class FaultsMpi : public FaultTest, public ::testing::WithParamInterface<int> {
 protected:
  int np() const { return GetParam(); }
  int last() const { return np() - 1; }
  std::string rank(int r) const { return "rank " + std::to_string(r); }
  std::string fault_on_last(const std::string& action) const {
    return std::to_string(last()) + ":3:" + action;
  }

  // `flags` on np() ranks of the mpi backend, under mpirun; `fault` goes in MESHTRAIN_FAULT.
  JobResult mpi_job(const std::string& flags, const std::string& fault = "", int signal = 0) {
    std::string command = MESHTRAIN_MPIRUN " " + std::to_string(np());
    JobOptions options = sending(signal);
    if (!fault.empty()) {
      command += " -x MESHTRAIN_FAULT";
      options.env = {{"MESHTRAIN_FAULT", fault}};
    }
    command += " " + train("--backend mpi --world " + std::to_string(np()) + " " + flags);
    return run_job(dir_, command, options);
  }

  // Four steps, a checkpoint after each, the model saved at the end.
  std::string checkpointed_run() const {
    return "--steps 4 --checkpoint-dir " + quoted(ckpt_) + " --checkpoint-every 1 --save " +
           quoted(save_);
  }

  // The job ended on its own, non-zero, within `bound` seconds, and took every process with it.
  static void expect_ended(const JobResult& job, double bound) {
    ASSERT_FALSE(job.hung) << "still running after the deadline:\n" << job.err;
    EXPECT_NE(job.exit_code, 0);
    EXPECT_LT(job.seconds, bound);
    EXPECT_EQ(job.left_alive, 0) << "processes of the job outlived it";
  }

  // The one line meshtrain reported, or "" (with a failure) when there were none or several.
  static std::string single_error(const JobResult& job) {
    const std::vector<std::string> errors = meshtrain_error_lines(job.err);
    EXPECT_THAT(errors, SizeIs(1)) << "meshtrain should report a failure once:\n" << job.err;
    return errors.empty() ? "" : errors.front();
  }
};

TEST_P(FaultsMpi, RankRaises) {
  const JobResult job = mpi_job(checkpointed_run(), fault_on_last("raise"));
  expect_ended(job, kBound);
  EXPECT_EQ(job.exit_code, 1);
  EXPECT_THAT(meshtrain_error_lines(job.err),
              ElementsAre("meshtrain: " + rank(last()) + ": injected fault (MESHTRAIN_FAULT) on " +
                          rank(last()) + " before step 3"));
  EXPECT_FALSE(std::filesystem::exists(save_));
  expect_resumes_from(2);
}

// A killed rank cannot speak: mpirun notices its death, ends the job and names it.
TEST_P(FaultsMpi, RankKilled) {
  const JobResult job = mpi_job(checkpointed_run(), fault_on_last("kill"));
  expect_ended(job, kKillBound);
  EXPECT_THAT(job.err, ContainsRegex("process " + rank(last()) + " .*exited on signal 9"));
  EXPECT_THAT(meshtrain_error_lines(job.err), SizeIs(0)) << job.err;
  EXPECT_FALSE(std::filesystem::exists(save_));
  expect_resumes_from(2);
}

// A stopped rank holds its peers in a collective until --timeout; the job must then end, the
// stopped rank with it, on one report that names the rank that did not arrive.
TEST_P(FaultsMpi, RankStopped) {
  const JobResult job = mpi_job(checkpointed_run(), fault_on_last("stop"));
  expect_ended(job, kBound);
  const std::string error = single_error(job);
  EXPECT_THAT(error, HasSubstr("timed out after " + std::to_string(kTimeout * 1000) + " ms"));
  const std::string reported = error.substr(error.find(':', std::string("meshtrain:").size()) + 1);
  EXPECT_THAT(reported, HasSubstr(rank(last()))) << "the report should name the stopped rank";
  EXPECT_FALSE(std::filesystem::exists(save_));
  expect_resumes_from(2);
}

// Rank 0 stopped: every other rank times out waiting for it and none hears rank 0's report, so one
// of them (rank 1 first; each later one waits longer, and is ended by its abort) reports, once.
TEST_P(FaultsMpi, RankZeroStopped) {
  const JobResult job = mpi_job(checkpointed_run(), "0:3:stop");
  expect_ended(job, kBound);
  const std::string error = single_error(job);
  EXPECT_THAT(error, HasSubstr("meshtrain: rank 1: timed out after"));
  EXPECT_THAT(error, HasSubstr("rank 0 did not end the job"));
  EXPECT_FALSE(std::filesystem::exists(save_));
  expect_resumes_from(2);
}

// MESHTRAIN_FAULT full: rank 0's disk fills before step 3, so writing the model fails; the
// previous file stays whole.
TEST_P(FaultsMpi, SaveFailsOnAFullDisk) {
  write_text(save_, "the previous model");
  const JobResult job = mpi_job("--steps 4 --save " + quoted(save_), "0:3:full");
  expect_ended(job, kBound);
  const std::string error = single_error(job);
  EXPECT_THAT(error, HasSubstr("meshtrain: rank 0: "));
  EXPECT_THAT(error, HasSubstr(save_ + ".partial"));
  EXPECT_THAT(error, HasSubstr(std::strerror(EFBIG))) << "the cause: the disk is full";
  EXPECT_EQ(read_text(save_), "the previous model");
  EXPECT_FALSE(std::filesystem::exists(save_ + ".partial"));
}

// The last rank's disk fills before step 3: its shard of checkpoint 3 fails, checkpoint 3 is
// never published, and checkpoint 2 resumes.
TEST_P(FaultsMpi, CheckpointFailsOnAFullDisk) {
  const JobResult job = mpi_job(checkpointed_run(), fault_on_last("full"));
  expect_ended(job, kBound);
  const std::string error = single_error(job);
  EXPECT_THAT(error, HasSubstr("checkpoint save failed on " + rank(last())));
  EXPECT_THAT(error, HasSubstr(std::strerror(EFBIG))) << "the cause: the disk is full";
  EXPECT_FALSE(std::filesystem::exists(save_));
  expect_resumes_from(2);
}

// mpirun forwards the signal to its ranks; the job ends, checkpointing or not.
TEST_P(FaultsMpi, SigtermEndsTheJob) {
  expect_ended_by_signal(mpi_job(long_run_flags(), "", SIGTERM));
}

TEST_P(FaultsMpi, SigintEndsTheJob) {
  expect_ended_by_signal(mpi_job(long_run_flags(), "", SIGINT));
}

// Every rank finds the same bad input; the job reports it once, not once per rank.
TEST_P(FaultsMpi, BadFlagReportedOnce) {
  const JobResult job = mpi_job("--steps 2 --lr inf");
  expect_ended(job, kBound);
  EXPECT_THAT(single_error(job), HasSubstr("lr must be finite"));
}

TEST_P(FaultsMpi, ShortDataReportedOnce) {
  write_token_file(tokens_, tokens_from_text("ten tokens", 256));
  const JobResult job = mpi_job("--steps 2");
  expect_ended(job, kBound);
  EXPECT_THAT(single_error(job), HasSubstr("fewer than one step reads"));
}

// --world that is not mpirun's process count: every rank meets it once MPI is up; one report.
TEST_P(FaultsMpi, WorldOtherThanTheProcessCountReportedOnce) {
  const std::string command = MESHTRAIN_MPIRUN " " + std::to_string(np()) + " " +
                              train("--backend mpi --steps 2 --world " + std::to_string(np() + 1));
  const JobResult job = run_job(dir_, command, sending(0));
  expect_ended(job, kBound);
  EXPECT_THAT(single_error(job), HasSubstr("--world must match the number of mpirun processes"));
}

INSTANTIATE_TEST_SUITE_P(Mpirun, FaultsMpi, ::testing::Values(2, 3),
                         [](const auto& info) { return "np" + std::to_string(info.param); });

}  // namespace
}  // namespace meshtrain::testing
