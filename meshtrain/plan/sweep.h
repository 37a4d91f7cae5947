// The planner against real runs (meshtrain sweep, docs/planner.md): a layout trained for a few
// steps on the local backend beside its prediction — step time (the model of step_time.h on a
// machine profile), peak memory and bytes sent (the replay's) — with the error of each.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "meshtrain/plan/machine_profile.h"
#include "meshtrain/train/train_config.h"

namespace meshtrain {

struct SweepFigures {
  double step_s = 0;  // measured: the median over the steps after the first
  uint64_t peak = 0;  // the largest rank's peak memory in a step, bytes
  uint64_t sent = 0;  // the busiest rank's bytes sent in a step, over every group
};

struct SweepRow {
  std::string layout;  // as the caller names it
  SweepFigures measured{}, predicted{};

  // predicted / measured - 1 of each figure: 0 where both are 0, NaN where only the prediction
  // is not.
  double step_error() const;
  double peak_error() const;
  double sent_error() const;
};

// The median of `values`: the middle one, or the mean of the middle two. InvalidArgument when
// empty.
double median(std::vector<double> values);

struct SweepLayout {
  std::string name;    // as the caller names it (the row's)
  TrainConfig config;  // its steps at least 3; trained on the local backend
};

// Replays every layout, then trains each `rounds` times, a round training every layout once in
// order (so that the machine's drifting pace reaches all of them alike), then predicts each on
// `machine`; a layout's measured step is the median over the rounds of each round's median, its
// peak and bytes the last round's. `on_row` sees each row once all are done, in order.
// InvalidArgument, before anything trains, for a configuration the planner cannot replay, fewer
// steps, no layout or no round.
std::vector<SweepRow> sweep_layouts(const std::vector<SweepLayout>& layouts,
                                    const MachineProfile& machine, int rounds,
                                    const std::function<void(const SweepRow&)>& on_row = {});

// The same with a profile measured over the sweep's own minutes: `before_round` runs before each
// round (a round of a Calibration, calibrate.h), and `machine` once after the last, its profile
// the one every layout is predicted on.
std::vector<SweepRow> sweep_layouts(const std::vector<SweepLayout>& layouts, int rounds,
                                    const std::function<void()>& before_round,
                                    const std::function<MachineProfile()>& machine,
                                    const std::function<void(const SweepRow&)>& on_row = {});

// Layouts that together exercise every part of the model on `world` ranks (even, at least 4), as
// train flags: FSDP full, grad_op and none (DDP), HSDP, TP with and without sequence
// parallelism, every pipeline schedule, activation checkpointing full and selective, and 3D
// (pp 2 x tp 2 with SP) when `world` is a multiple of 4.
// Pipelined layouts run 4 micro-batches, the others 2.
std::vector<std::string> auto_sweep_layouts(int world);

}  // namespace meshtrain
