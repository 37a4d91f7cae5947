// The replay shared by validate() and simulate(): each rank runs its actions in order, a receive
// waiting for its send, everything else at once. Assumes each action's same-rank prerequisites
// come earlier in its list (validate checks that first), so receives are the only waits.
#pragma once

#include <vector>

#include "meshtrain/plugins/pp/schedule.h"
#include "meshtrain/plugins/pp/schedule_sim.h"

namespace meshtrain {

struct Replay {
  std::vector<double> finish;   // per rank: when its last action ended
  std::vector<double> busy;     // per rank: time computing
  std::vector<size_t> stopped;  // per rank: index of the receive it blocks on, or its length
  bool complete = true;         // false: a deadlock, `stopped` says where
  std::vector<std::vector<TimedAction>> timeline;  // per rank: the actions run, in order
};

// Each computation takes cost(action); sends and receives take no time.
Replay replay(const Schedule& schedule, const ActionCost& cost);
// The same, each computation advancing at speed(...) of the moment, event by event: `busy` is the
// time spent computing. A deadlock ends it as above.
Replay replay(const Schedule& schedule, const ActionCost& cost, const ComputeSpeed& speed);

}  // namespace meshtrain
