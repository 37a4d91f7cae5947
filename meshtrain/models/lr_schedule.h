// Learning-rate schedules: constant by default; optionally a linear warmup from 0 and a cosine
// decay to min_lr at decay_steps (constant min_lr afterwards), as in GPT-2 and llm.c recipes.
#pragma once

#include <cstdint>

namespace meshtrain {

struct LrSchedule {
  float lr = 3e-4f;
  int64_t warmup_steps = 0;  // steps 0..warmup-1 ramp (step + 1) / warmup * lr
  int64_t decay_steps = 0;   // 0: no decay; else cosine from lr (after warmup) to min_lr
  float min_lr = 0.0f;

  void validate() const;         // InvalidArgument naming the bad field
  float at(int64_t step) const;  // step counts from 0
};

}  // namespace meshtrain
