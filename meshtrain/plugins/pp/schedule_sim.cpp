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

ActionCost checked(const ActionCost& cost) {
  return [cost](const Action& a) {
    const double c = cost(a);
    MT_CHECK(std::isfinite(c) && c >= 0, "the cost of ", to_string(a),
             " must be finite and non-negative, got ", c);
    return c;
  };
}

Simulation summarise(const Schedule& schedule, const Replay& run) {
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
  sim.bubble_fraction = sim.makespan > 0 ? idle / (schedule.ranks * sim.makespan) : 0.0;
  return sim;
}

}  // namespace

Simulation simulate(const Schedule& schedule, const Costs& costs) {
  check_costs(costs);
  return simulate(schedule, [&](const Action& a) {
    switch (a.kind) {
      case ActionKind::forward:
        return costs.forward;
      case ActionKind::backward_input:
        return costs.backward_input;
      case ActionKind::backward_weight:
        return costs.backward_weight;
      case ActionKind::full_backward:
        return costs.backward_input + costs.backward_weight;
      default:  // the replay asks computations only
        throw InvalidArgument("simulate: no cost for the transfer " + to_string(a));
    }
  });
}

Simulation simulate(const Schedule& schedule, const ActionCost& cost) {
  validate(schedule);
  return summarise(schedule, replay(schedule, checked(cost)));
}

Simulation simulate(const Schedule& schedule, const ActionCost& cost, const ComputeSpeed& speed) {
  validate(schedule);
  return summarise(schedule, replay(schedule, checked(cost), speed));
}

}  // namespace meshtrain
