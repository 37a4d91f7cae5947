#include "meshtrain/plugins/pp/schedule_comm.h"

#include "meshtrain/core/error.h"

namespace meshtrain {

Schedule add_communication(const Schedule& compute_only) {
  Schedule out = compute_only;
  const int last = compute_only.stages() - 1;
  // Whether stage `s`'s neighbour `t` is on another rank (t may be out of range: no neighbour).
  const auto remote = [&](int s, int t) {
    return t >= 0 && t <= last && compute_only.rank_of(s) != compute_only.rank_of(t);
  };
  for (size_t r = 0; r < compute_only.per_rank.size(); ++r) {
    std::vector<Action>& actions = out.per_rank[r];
    actions.clear();
    for (const Action& a : compute_only.per_rank[r]) {
      const int s = a.stage, mb = a.micro_batch;
      if (!is_compute(a.kind))
        throw InvalidArgument(detail::concat("add_communication takes computations only, found ",
                                             to_string(a), " on rank ", r));
      const bool backward =
          a.kind == ActionKind::full_backward || a.kind == ActionKind::backward_input;
      if (a.kind == ActionKind::forward && remote(s, s - 1))
        actions.push_back({ActionKind::recv_f, s, mb});
      if (backward && remote(s, s + 1)) actions.push_back({ActionKind::recv_b, s, mb});
      actions.push_back(a);
      if (a.kind == ActionKind::forward && remote(s, s + 1))
        actions.push_back({ActionKind::send_f, s, mb});
      if (backward && remote(s, s - 1)) actions.push_back({ActionKind::send_b, s, mb});
    }
  }
  return out;
}

}  // namespace meshtrain
