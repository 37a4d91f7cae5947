#include "meshtrain/plugins/pp/schedule_replay.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "meshtrain/core/error.h"

namespace meshtrain {
Replay replay(const Schedule& schedule, const ActionCost& cost_of) {
  const size_t ranks = schedule.per_rank.size();
  Replay out{std::vector<double>(ranks, 0.0), std::vector<double>(ranks, 0.0),
             std::vector<size_t>(ranks, 0), true, std::vector<std::vector<TimedAction>>(ranks)};
  std::map<Action, double> posted;  // send -> when it was posted
  // Each pass runs every rank as far as it can; a pass where none moves ends the replay. The
  // times do not depend on the order of the passes: an action starts when its rank is free and,
  // for a receive, its send was posted.
  for (bool moved = true; moved;) {
    moved = false;
    for (size_t r = 0; r < ranks; ++r) {
      const std::vector<Action>& actions = schedule.per_rank[r];
      for (size_t& next = out.stopped[r]; next < actions.size(); ++next) {
        const Action& a = actions[next];
        double start = out.finish[r];
        if (is_recv(a.kind)) {
          const auto send = posted.find(matching_transfer(a));
          if (send == posted.end()) break;
          start = std::max(start, send->second);
        }
        const double cost = is_compute(a.kind) ? cost_of(a) : 0.0;
        out.finish[r] = start + cost;
        out.busy[r] += cost;
        out.timeline[r].push_back({a, start, out.finish[r]});
        if (is_send(a.kind)) posted[a] = out.finish[r];
        moved = true;
      }
    }
  }
  for (size_t r = 0; r < ranks; ++r)
    out.complete = out.complete && out.stopped[r] == schedule.per_rank[r].size();
  return out;
}

Replay replay(const Schedule& schedule, const ActionCost& cost_of, const ComputeSpeed& speed) {
  const size_t ranks = schedule.per_rank.size();
  Replay out{std::vector<double>(ranks, 0.0), std::vector<double>(ranks, 0.0),
             std::vector<size_t>(ranks, 0), true, std::vector<std::vector<TimedAction>>(ranks)};
  std::map<Action, double> posted;
  std::vector<bool> computing(ranks, false);
  std::vector<double> left(ranks, 0.0), started(ranks, 0.0);  // of the computation under way
  double now = 0;
  while (true) {
    // At `now`, every rank that is not computing runs its transfers and starts its next
    // computation, until a receive finds no send; a send may free a receive of a rank already
    // passed, hence the passes.
    for (bool moved = true; moved;) {
      moved = false;
      for (size_t r = 0; r < ranks; ++r) {
        const std::vector<Action>& actions = schedule.per_rank[r];
        for (size_t& next = out.stopped[r]; !computing[r] && next < actions.size(); ++next) {
          const Action& a = actions[next];
          if (is_recv(a.kind) && !posted.contains(matching_transfer(a))) break;
          moved = true;
          const double cost = is_compute(a.kind) ? cost_of(a) : 0.0;
          if (cost > 0) {
            computing[r] = true;
            left[r] = cost;
            started[r] = now;
            break;  // `next` stays at the computation until it ends
          }
          out.finish[r] = now;
          out.timeline[r].push_back({a, now, now});
          if (is_send(a.kind)) posted[a] = now;
        }
      }
    }
    // The next computation to end, at the speeds of this moment.
    std::vector<double> speeds(ranks, 0.0);
    double step = std::numeric_limits<double>::infinity();
    for (size_t r = 0; r < ranks; ++r) {
      if (!computing[r]) continue;
      speeds[r] = speed(computing, static_cast<int>(r));
      MT_CHECK(speeds[r] > 0 && speeds[r] <= 1, "a compute speed must lie in (0, 1], got ",
               speeds[r], " for rank ", r);
      step = std::min(step, left[r] / speeds[r]);
    }
    if (!std::isfinite(step)) break;  // nothing computes: done, or deadlocked
    now += step;
    for (size_t r = 0; r < ranks; ++r) {
      if (!computing[r]) continue;
      left[r] -= speeds[r] * step;
      // Ends now, up to rounding: the work left would take no time worth a separate event.
      if (left[r] > speeds[r] * step * 1e-9 && left[r] > 1e-15) continue;
      computing[r] = false;
      out.finish[r] = now;
      out.busy[r] += now - started[r];
      out.timeline[r].push_back({schedule.per_rank[r][out.stopped[r]++], started[r], now});
    }
  }
  for (size_t r = 0; r < ranks; ++r)
    out.complete = out.complete && out.stopped[r] == schedule.per_rank[r].size();
  return out;
}

}  // namespace meshtrain
