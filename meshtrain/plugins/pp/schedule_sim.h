// Checking and costing a schedule without running it: validate() proves that a generic runtime
// can execute it (every computation once, on its stage's rank, after what it needs, transfers
// matched, no deadlock); simulate() replays it with per-action costs.
#pragma once

#include <functional>
#include <vector>

#include "meshtrain/plugins/pp/schedule.h"

namespace meshtrain {

// Time of one action of one stage. A full backward B costs backward_input + backward_weight;
// sends and receives are free (a receive only waits for its send).
struct Costs {
  double forward = 1.0;
  double backward_input = 1.0;
  double backward_weight = 1.0;
};

// The time one computation takes (a send or receive takes none).
using ActionCost = std::function<double(const Action&)>;

// How fast `rank` computes while the ranks marked in `computing` compute (itself among them): its
// share of what it runs on, in (0, 1]. Ranks sharing CPU cores slow each other down
// (step_time.h).
using ComputeSpeed = std::function<double(const std::vector<bool>& computing, int rank)>;

// One action as the replay ran it: a computation from `start` to `end` (its cost later, or longer
// on a shared processor); a send posted at `start` (= end); a receive done at `end`, when its send
// was posted and its rank free.
struct TimedAction {
  Action action;
  double start = 0, end = 0;
};

struct Simulation {
  double makespan = 0;         // from the first action to the last rank's end
  std::vector<double> busy;    // per rank: time spent computing
  std::vector<double> idle;    // per rank: makespan - busy (the bubble)
  double bubble_fraction = 0;  // total idle / (ranks * makespan)
  // Per rank: most micro-batches whose activations it holds at once, counted per stage from F to
  // the stage's last backward action (B, or W when split), summed over the rank's stages.
  std::vector<int> peak_in_flight;
  std::vector<std::vector<TimedAction>> timeline;  // per rank, its actions in order
};

// Throws InvalidArgument naming the offending action when the schedule is not executable: an
// action out of range or on the wrong rank, a computation missing or repeated (each stage and
// micro-batch needs one F and either one B or one I and one W), a send or receive without its
// other end, an action before one it needs on its rank (a W before its I, a B or I before its F,
// a computation before its receive), or a deadlock (naming every blocked receive).
void validate(const Schedule& schedule);

// Validates, then replays with `costs`: every rank runs its actions in order as soon as it can.
Simulation simulate(const Schedule& schedule, const Costs& costs = {});
// With a time per computation (F, I, W or B) of its own: stages of unequal cost (the planner's,
// from each stage's counted kernels). InvalidArgument for a cost that is negative or not finite.
Simulation simulate(const Schedule& schedule, const ActionCost& cost);
// Each computation advancing at the speed of the moment: cost(action) is its time alone, and a
// processor shared as the schedule runs stretches it. `busy` is then the time spent computing.
// InvalidArgument for a speed outside (0, 1].
Simulation simulate(const Schedule& schedule, const ActionCost& cost, const ComputeSpeed& speed);

}  // namespace meshtrain
