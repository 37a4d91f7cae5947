// The classic pipeline schedules, generated as data (schedule.h) with their sends and receives.
#pragma once

#include <cstdint>
#include <string_view>

#include "meshtrain/plugins/pp/schedule.h"

namespace meshtrain {

enum class ScheduleKind {
  gpipe,        // all forwards, then all backwards (Huang et al. 2019): holds m micro-batches
  one_f_one_b,  // 1F1B, PipeDream-Flush (Narayanan et al. 2021): holds at most p
  interleaved,  // interleaved 1F1B, v stages per rank (Megatron-LM, Narayanan et al. 2021)
  zb_h1,        // ZB-H1 (Qi et al. 2024): backward split into I and W, W fills the cool-down
};

ScheduleKind parse_schedule_kind(std::string_view name);  // gpipe, 1f1b, interleaved, zb-h1
std::string_view schedule_kind_name(ScheduleKind kind);

// The most actions (forwards, backwards, sends and receives, over all ranks) a schedule may have,
// counted as 6 x pp x micro-batches x virtual stages: 200 MB of actions at this bound, before the
// checks' and the simulator's own maps (pp = 64 with 1024 micro-batches and 4 virtual stages is
// 1.6 million).
inline constexpr int64_t kMaxScheduleActions = int64_t{1} << 24;

// The schedule of `kind` for `ranks` pipeline ranks and `micro_batches` micro-batches per step.
// `virtual_stages` (stages per rank) must be 1 except for interleaved, which needs at least 2 and
// at least as many micro-batches as ranks, and the schedule at most kMaxScheduleActions actions.
// Throws InvalidArgument naming the bad value.
Schedule make_schedule(ScheduleKind kind, int ranks, int micro_batches, int virtual_stages = 1);

// A pass without backward (validation), for any schedule's stage placement: each rank runs the
// forwards of its stages, the first stage's micro-batches in order, then the next stage's (as
// GPipe's forward half, over virtual stages too), with their transfers. Not a training schedule:
// validate() wants backwards.
Schedule make_forward_schedule(int ranks, int micro_batches, int virtual_stages = 1);

}  // namespace meshtrain
