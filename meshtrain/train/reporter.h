// TrainReporter: what rank 0 tells the user during a run — a progress line kept every --log-every
// steps (on a terminal, a live line redrawn in place between them; elsewhere nothing between them
// and no control characters), the metrics file (JSON lines, one object per step, opened at the
// first step; a resumed run continues it; a write that fails ends the run with an IoError naming
// the file), the closing summary and the sample.
#pragma once

#include <chrono>
#include <fstream>
#include <iosfwd>
#include <string>

#include "meshtrain/train/step_metrics.h"
#include "meshtrain/train/train_config.h"

namespace meshtrain {

class TrainReporter {
 public:
  TrainReporter(const TrainConfig& config, std::ostream& out, bool interactive);
  // `plan`: the strategies and their axes (ParallelPlan::describe).
  void start(const std::string& mesh, const std::string& plan, int64_t parameters);
  // The run resumed from `checkpoint` with `steps_done` steps behind it: says so, and drops the
  // metrics lines of later steps (a crashed run logs steps past its last checkpoint, which this
  // run logs again) and a torn last line (one a failed write left without its newline).
  void resumed(const std::string& checkpoint, int64_t steps_done);
  void on_step(const StepMetrics& m);
  // A line between progress reports: a checkpoint written, a resume.
  void note(const std::string& text);
  // The closing summary: the losses, throughput and memory of the run.
  void finish();
  // The sample, printed as it is drawn: "sample:" before the first byte, a newline after the last.
  void sample_byte(char byte);
  void end_sample();

 private:
  // A kept line stays; on a terminal the others are the live line, redrawn in place.
  void print_progress(const StepMetrics& m, bool kept);
  void write_metrics(const std::string& line);

  TrainConfig config_;
  std::ostream& out_;
  bool interactive_;
  std::ofstream metrics_;
  std::chrono::steady_clock::time_point start_;
  bool seen_step_ = false;
  bool live_line_ = false;  // the cursor ends a line that the next output replaces
  int64_t first_step_ = 0;  // a resumed run starts past 0
  double first_loss_ = 0.0;
  StepMetrics last_;
  double tokens_per_s_sum_ = 0.0;
  int64_t timed_steps_ = 0;
  bool sampling_ = false;  // "sample:" is printed, the closing newline is not
};

std::string format_bytes(uint64_t bytes);  // "12.3 MiB"

}  // namespace meshtrain
