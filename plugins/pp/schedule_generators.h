// The classic pipeline schedules, generated as data (schedule.h) with their sends and receives.
#pragma once

#include <string_view>

#include "plugins/pp/schedule.h"

namespace meshtrain {

enum class ScheduleKind {
  gpipe,        // all forwards, then all backwards (Huang et al. 2019): holds m micro-batches
  one_f_one_b,  // 1F1B, PipeDream-Flush (Narayanan et al. 2021): holds at most p
  interleaved,  // interleaved 1F1B, v stages per rank (Megatron-LM, Narayanan et al. 2021)
  zb_h1,        // ZB-H1 (Qi et al. 2024): backward split into I and W, W fills the cool-down
};

ScheduleKind parse_schedule_kind(std::string_view name);  // gpipe, 1f1b, interleaved, zb-h1
std::string_view schedule_kind_name(ScheduleKind kind);

// The schedule of `kind` for `ranks` pipeline ranks and `micro_batches` micro-batches per step.
// `virtual_stages` (stages per rank) must be 1 except for interleaved, which needs at least 2 and
// at least as many micro-batches as ranks. Throws InvalidArgument naming the bad value.
Schedule make_schedule(ScheduleKind kind, int ranks, int micro_batches, int virtual_stages = 1);

}  // namespace meshtrain
