// What a training run makes of its trace recorders (meshtrain/core/trace/recorder.h): each rank's Chrome
// trace file, and the --profile table that rank 0 prints from every rank's figures.
// docs/tracing.md explains both.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "meshtrain/core/comm/communicator.h"
#include "meshtrain/core/trace/recorder.h"

namespace meshtrain {

// Writes the recorder's spans as a Chrome trace (JSON Trace Event Format: "X" complete events,
// ts and dur in microseconds of the monotonic clock, pid = rank, one tid per track named by "M"
// thread_name events) to dir/rank_<r>.json, through rank_<r>.json.partial renamed once written
// and synced. `info` goes into the file's otherData. Returns the path written.
std::string write_chrome_trace(const trace::Recorder& recorder, const std::string& dir,
                               const std::map<std::string, std::string>& info);

// One rank's profile figures, totals over the profiled steps.
struct RankProfile {
  int64_t steps = 0;
  int64_t step_ns = 0;                           // the step spans
  std::map<std::string, trace::Totals> kernels;  // by op
  std::map<std::string, trace::Totals> waits;    // by op kind ("all_gather"): exposed comm
  std::map<std::string, int64_t> comm_busy_ns;   // by group, and "" for any group: in flight
  int64_t forward_ns = 0, backward_ns = 0;       // layer spans

  int64_t kernel_ns() const;
  int64_t wait_ns() const;
};
RankProfile rank_profile(const trace::Recorder& recorder);
std::string to_json(const RankProfile& profile);
RankProfile rank_profile_from_json(const std::string& text);

// The --profile table from every rank's figures (by rank): per step, the mean over ranks and the
// slowest rank of each row; communication in flight against exposed; achieved model FLOP/s
// (ModelSpec::training_flops) over the slowest rank's step time.
std::string profile_table(const std::vector<RankProfile>& ranks, double flops_per_step);

}  // namespace meshtrain
