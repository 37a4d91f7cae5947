#include "meshtrain/models/lr_schedule.h"

#include <cmath>

#include "meshtrain/core/error.h"

namespace meshtrain {

void LrSchedule::validate() const {
  MT_CHECK(lr >= 0.0f && std::isfinite(lr), "LrSchedule: lr must be finite and >= 0, got ", lr);
  MT_CHECK(warmup_steps >= 0, "LrSchedule: warmup_steps must be >= 0, got ", warmup_steps);
  MT_CHECK(decay_steps == 0 || decay_steps > warmup_steps,
           "LrSchedule: decay_steps must be 0 (no decay) or greater than warmup_steps = ",
           warmup_steps, ", got ", decay_steps);
  MT_CHECK(min_lr >= 0.0f && min_lr <= lr, "LrSchedule: min_lr must be in [0, lr = ", lr, "], got ",
           min_lr);
}

float LrSchedule::at(int64_t step) const {
  MT_CHECK(step >= 0, "LrSchedule::at: steps count from 0, got ", step);
  if (step < warmup_steps)
    return lr * static_cast<float>(step + 1) / static_cast<float>(warmup_steps);
  if (decay_steps == 0) return lr;
  if (step >= decay_steps) return min_lr;
  const double progress =
      static_cast<double>(step - warmup_steps) / static_cast<double>(decay_steps - warmup_steps);
  const double cosine = 0.5 * (1.0 + std::cos(3.14159265358979323846 * progress));
  return static_cast<float>(min_lr + cosine * (lr - min_lr));
}

}  // namespace meshtrain
