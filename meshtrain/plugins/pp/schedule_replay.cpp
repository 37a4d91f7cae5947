#include "meshtrain/plugins/pp/schedule_replay.h"

#include <algorithm>
#include <map>

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

}  // namespace meshtrain
