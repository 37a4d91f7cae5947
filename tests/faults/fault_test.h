// The failure tests' common ground: a token file, the run every case starts from (the demo model,
// a few small steps), the time bounds, and the resume that must still work after a fault.
#pragma once

#include <cstdio>
#include <filesystem>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "meshtrain/models/token_file.h"
#include "tests/apps/apps_test_support.h"
#include "tests/faults/fault_jobs.h"

namespace meshtrain::testing {

class FaultTest : public ::testing::Test {
 protected:
  static constexpr int kTimeout = 5;  // --timeout (seconds) of every run
  // Upper bounds only (a loaded CI machine may be slow, never too fast): a job that ends on an
  // error, a timeout or a signal, and one whose rank was killed (mpirun ends it at once).
  static constexpr double kBound = kTimeout + 15.0;
  static constexpr double kKillBound = 10.0;

  void SetUp() override {
    write_token_file(tokens_, tokens_from_text(sample_prose(10), 256));
  }

  static std::string cli() { return quoted(MESHTRAIN_CLI); }

  static JobOptions sending(int signal) {
    JobOptions options;
    options.signal = signal;
    return options;
  }

  // `meshtrain train` on the test's data with the demo model, then `flags`.
  std::string train(const std::string& flags) const {
    return cli() + " train --data " + quoted(tokens_) + " --model demo --batch 12 --seq 16" +
           " --sample 0 --timeout " + std::to_string(kTimeout) + " " + flags;
  }

  // A job that had a fault before step `step + 1` while checkpointing every step: its newest
  // checkpoint is step `step`, complete, and a new run resumes from it.
  void expect_resumes_from(int64_t step) {
    EXPECT_EQ(newest_complete_step(ckpt_), step);
    if (step == 0) return;
    const std::string flags =
        "--world 2 --steps " + std::to_string(step + 1) + " --resume " + quoted(ckpt_);
    const JobResult resumed = run_job(dir_, train(flags));
    EXPECT_EQ(resumed.exit_code, 0) << resumed.err;
    char folder[32];
    std::snprintf(folder, sizeof folder, "/step-%08lld", static_cast<long long>(step));
    EXPECT_THAT(resumed.out, ::testing::HasSubstr("resumed from " + ckpt_ + folder +
                                                  " at step " + std::to_string(step)));
  }

  // Flags of a long run that checkpoints every step and saves at the end, for the signal cases.
  std::string long_run_flags() const {
    return "--steps 100000 --checkpoint-dir " + quoted(ckpt_) + " --checkpoint-every 1 --save " +
           quoted(save_);
  }

  // A long run sent SIGTERM or SIGINT after its first checkpoint ended non-zero, soon, with all
  // its processes, leaving no partial output under a final name, and its newest checkpoint
  // resumes.
  void expect_ended_by_signal(const JobResult& job) {
    ASSERT_TRUE(job.signalled) << "no checkpoint before the deadline\n" << job.out << job.err;
    ASSERT_FALSE(job.hung) << job.err;
    EXPECT_NE(job.exit_code, 0);
    EXPECT_LT(job.seconds, kKillBound);
    EXPECT_EQ(job.left_alive, 0);
    EXPECT_FALSE(std::filesystem::exists(save_));
    const int64_t newest = newest_complete_step(ckpt_);
    EXPECT_GE(newest, 1);
    expect_resumes_from(newest);
  }

  ScratchDir dir_;
  const std::string tokens_ = dir_.file("tokens.bin");
  const std::string ckpt_ = dir_.file("ckpt");
  const std::string save_ = dir_.file("model.safetensors");
};

}  // namespace meshtrain::testing
