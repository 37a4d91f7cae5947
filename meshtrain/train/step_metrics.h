// What one training step reports. Every field is the same on every rank (reduced over ranks).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace meshtrain {

struct StepMetrics {
  int64_t step = 0;
  double loss = 0.0;        // mean cross-entropy over the global batch
  // Validation's mean loss after this step's update, when the step validated (--val-every).
  std::optional<double> val_loss;
  float lr = 0.f;
  double grad_norm = 0.0;  // global gradient norm before clipping
  double step_time_s = 0.0;  // slowest rank
  double tokens_per_s = 0.0;  // global tokens / step time
  // The model's FLOPs of the step (ModelSpec::training_flops) per second of step time, and their
  // share of the devices' published dense peak (0 where that is not known: CPUs, other GPUs).
  double model_flops_per_s = 0.0;
  double mfu = 0.0;
  double exposed_comm_s = 0.0;  // time blocked on communication, slowest rank
  // Of that, the time blocked on other pipeline stages (StepRunner::last_bubble_s), largest over
  // ranks; only a pipelined run has one.
  std::optional<double> bubble_s;
  uint64_t comm_bytes = 0;      // bytes sent in this step on the strategies' groups, busiest rank
  uint64_t peak_mem_bytes = 0;  // tracked peak of the step, largest over ranks
  uint64_t sharded_state_bytes = 0;     // parameters + gradients + optimizer held between steps
  uint64_t model_state_peak_bytes = 0;  // peak of those plus unsharded parameters and gradients
  uint64_t unsharded_param_peak_bytes = 0;
  uint64_t unsharded_grad_peak_bytes = 0;
  uint64_t comm_staging_peak_bytes = 0;  // all-gather outputs, reduce-scatter inputs
  std::vector<uint64_t> peak_mem_per_rank;
};

}  // namespace meshtrain
