// Runs meshtrain jobs for the failure tests (docs/failures.md): a command (meshtrain alone, or
// mpirun and its ranks) in a session of its own, timed, its output captured, optionally sent a
// signal once it is training, killed if it hangs, and checked for processes left alive.
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "tests/support/scratch_dir.h"

namespace meshtrain::testing {

struct JobOptions {
  std::vector<std::pair<std::string, std::string>> env;  // set for the job only
  // Sent to the job's first process (meshtrain, or mpirun) once its stdout shows `signal_after`.
  int signal = 0;
  std::string signal_after = "\ncheckpoint ";
  // When set, SIGCONT follows the signal this long after it: a stopped job, continued.
  std::chrono::milliseconds continue_after{0};
  // A job still running after this has hung: it is killed and the test fails on `hung`, instead
  // of ctest's timeout ending the whole binary without a word.
  std::chrono::seconds deadline{90};
};

struct JobResult {
  int exit_code = -1;  // 128 + N when signal N ended the first process, as a shell reports it
  double seconds = 0;  // wall time from the start, or from the signal when one was sent
  bool hung = false;
  bool signalled = false;  // the signal was sent (the job got as far as `signal_after`)
  int left_alive = 0;      // processes of the job's session alive 10 s after it ended
  std::string out, err;
};

// Runs `command` through /bin/sh (exec'd, so that the job's first process is its program), its
// stdout and stderr in files of `dir`.
JobResult run_job(const ScratchDir& dir, const std::string& command,
                  const JobOptions& options = {});

// meshtrain's own error reports in `err`: "meshtrain: error: ..." (one process) or
// "meshtrain: rank N: ..." (under MPI). mpirun's banners are not among them.
std::vector<std::string> meshtrain_error_lines(const std::string& err);

// The newest step of `checkpoint_dir` (0: none), with a failure for every step folder there that
// lacks its COMPLETE marker (a partial checkpoint under a final name).
int64_t newest_complete_step(const std::string& checkpoint_dir);

std::string quoted(const std::string& text);  // for sh

}  // namespace meshtrain::testing
