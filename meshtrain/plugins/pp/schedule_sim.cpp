#include "meshtrain/plugins/pp/schedule_sim.h"

#include <algorithm>
#include <cmath>

#include "meshtrain/core/error.h"
#include "meshtrain/plugins/pp/schedule_replay.h"

namespace meshtrain {
namespace {

// Walks a rank's actions in order: an F takes a micro-batch's activations for its stage, the
// stage's last backward action (B, or the W after an I) releases them.
int peak_in_flight(const std::vector<Action>& actions) {
  int held = 0, peak = 0;
  for (const Action& a : actions) {
    if (a.kind == ActionKind::forward) peak = std::max(peak, ++held);
    if (a.kind == ActionKind::full_backward || a.kind == ActionKind::backward_weight) --held;
  }
  return peak;
}

void check_costs(const Costs& c) {
  for (const double cost : {c.forward, c.backward_input, c.backward_weight})
    MT_CHECK(std::isfinite(cost) && cost >= 0, "action costs must be finite and non-negative, got ",
             c.forward, ",", c.backward_input, ",", c.backward_weight);
  MT_CHECK(c.forward + c.backward_input + c.backward_weight > 0.0,
           "action costs must not all be zero, got ", c.forward, ",", c.backward_input, ",",
           c.backward_weight);
}

}  // namespace

Simulation simulate(const Schedule& schedule, const Costs& costs) {
  validate(schedule);
  check_costs(costs);
  const Replay run = replay(schedule, costs);
  Simulation sim;
  sim.makespan = *std::max_element(run.finish.begin(), run.finish.end());
  sim.busy = run.busy;
  sim.timeline = run.timeline;
  double idle = 0;
  for (int r = 0; r < schedule.ranks; ++r) {
    sim.idle.push_back(sim.makespan - run.busy[r]);
    idle += sim.idle.back();
    sim.peak_in_flight.push_back(peak_in_flight(schedule.per_rank[r]));
  }
  sim.bubble_fraction = idle / (schedule.ranks * sim.makespan);
  return sim;
}

}  // namespace meshtrain
