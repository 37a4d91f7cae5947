// validate(), declared in schedule_sim.h: the checks in the order that gives the clearest message
// (an action's own defects, then what is missing, then order, then deadlock).
#include <map>
#include <string>

#include "meshtrain/core/error.h"
#include "meshtrain/plugins/pp/schedule_replay.h"
#include "meshtrain/plugins/pp/schedule_sim.h"

namespace meshtrain {
namespace {

struct Placed {
  Action action;
  int rank;
  size_t index;
};

// "1F3 (rank 1, position 4)", positions counted from 1 as a reader counts a rank's line.
std::string describe(const Placed& p) {
  return detail::concat(to_string(p.action), " (rank ", p.rank, ", position ", p.index + 1, ")");
}

// The work an action does. A B is an I and a W at once, so keying actions by their work makes a B
// collide with an I or W of the same stage and micro-batch, as a repeated action collides.
std::vector<Action> work_of(const Action& a) {
  if (a.kind != ActionKind::full_backward) return {a};
  return {{ActionKind::backward_input, a.stage, a.micro_batch},
          {ActionKind::backward_weight, a.stage, a.micro_batch}};
}

using WorkIndex = std::map<Action, Placed>;

// Calls fn(placed) for every action, rank by rank, in order.
template <typename Fn>
void for_each_placed(const Schedule& s, Fn&& fn) {
  for (int r = 0; r < s.ranks; ++r)
    for (size_t i = 0; i < s.per_rank[r].size(); ++i) fn(Placed{s.per_rank[r][i], r, i});
}

void check_header(const Schedule& s) {
  MT_CHECK(s.ranks >= 1, "a schedule needs at least one rank, got ", s.ranks);
  MT_CHECK(s.virtual_stages >= 1, "a schedule needs at least one stage per rank, got ",
           s.virtual_stages);
  MT_CHECK(s.micro_batches >= 1, "a schedule needs at least one micro-batch, got ",
           s.micro_batches);
  MT_CHECK(static_cast<int>(s.per_rank.size()) == s.ranks,
           "a schedule needs one action list per rank: ", s.ranks, " ranks, got ",
           s.per_rank.size(), " lists");
}

void check_placement(const Schedule& s, const Placed& p) {
  const Action& a = p.action;
  const int stages = s.stages();
  if (a.stage < 0 || a.stage >= stages)
    throw InvalidArgument(
        detail::concat(describe(p), ": stage out of range, the schedule has ", stages, " stages"));
  if (a.micro_batch < 0 || a.micro_batch >= s.micro_batches)
    throw InvalidArgument(detail::concat(describe(p), ": micro-batch out of range, the schedule ",
                                         "has ", s.micro_batches, " micro-batches"));
  if (s.rank_of(a.stage) != p.rank)
    throw InvalidArgument(detail::concat(describe(p), " is on the wrong rank: stage ", a.stage,
                                         " lives on rank ", s.rank_of(a.stage), " (stage % ",
                                         s.ranks, ")"));
  if (is_compute(a.kind)) return;
  const int peer = matching_transfer(a).stage;
  if (peer < 0 || peer >= stages)
    throw InvalidArgument(
        detail::concat(describe(p), " has no stage to talk to: stage ", peer, " does not exist"));
  if (s.rank_of(peer) == p.rank)
    throw InvalidArgument(detail::concat(describe(p), " is a transfer within rank ", p.rank,
                                         " (stages ", a.stage, " and ", peer,
                                         "), which needs none"));
}

WorkIndex index_work(const Schedule& s) {
  WorkIndex index;
  for_each_placed(s, [&](const Placed& p) {
    check_placement(s, p);
    for (const Action& work : work_of(p.action)) {
      const auto [it, fresh] = index.emplace(work, p);
      if (!fresh)
        throw InvalidArgument(
            detail::concat("duplicated work: ", describe(p), " repeats ", describe(it->second)));
    }
  });
  return index;
}

// Every stage and micro-batch has its F, I and W (a B counting as both I and W).
void check_complete(const Schedule& s, const WorkIndex& index) {
  for (int stage = 0; stage < s.stages(); ++stage)
    for (int mb = 0; mb < s.micro_batches; ++mb) {
      const auto has = [&](ActionKind kind) { return index.count({kind, stage, mb}) > 0; };
      const auto name = [&](ActionKind kind) { return to_string({kind, stage, mb}); };
      const std::string where = detail::concat(" on rank ", s.rank_of(stage));
      if (!has(ActionKind::forward))
        throw InvalidArgument(detail::concat("missing ", name(ActionKind::forward), where));
      const bool input = has(ActionKind::backward_input);
      const bool weight = has(ActionKind::backward_weight);
      if (!input && !weight)
        throw InvalidArgument(detail::concat(
            "missing the backward of stage ", stage, " on micro-batch ", mb, where, ": ",
            name(ActionKind::full_backward), ", or ", name(ActionKind::backward_input), " and ",
            name(ActionKind::backward_weight)));
      if (!input || !weight)
        throw InvalidArgument(detail::concat(
            "missing ", name(input ? ActionKind::backward_weight : ActionKind::backward_input),
            where, " to go with ",
            name(input ? ActionKind::backward_input : ActionKind::backward_weight)));
    }
}

void check_transfers_matched(const Schedule& s, const WorkIndex& index) {
  for_each_placed(s, [&](const Placed& p) {
    const ActionKind kind = p.action.kind;
    if (is_compute(kind) || index.count(matching_transfer(p.action))) return;
    throw InvalidArgument(detail::concat(is_send(kind) ? "send " : "receive ", describe(p),
                                         " has no matching ", is_send(kind) ? "receive " : "send ",
                                         to_string(matching_transfer(p.action))));
  });
}

// What must run earlier on the same rank: a computation's inputs (received, or computed on this
// rank when the neighbouring stage lives here too), a send's data, a W's I.
std::vector<Action> prerequisites(const Schedule& s, const Action& a) {
  const int stage = a.stage, mb = a.micro_batch;
  const auto here = [&](int other) { return s.rank_of(other) == s.rank_of(stage); };
  switch (a.kind) {
    case ActionKind::forward:
      if (stage == 0) return {};
      if (here(stage - 1)) return {{ActionKind::forward, stage - 1, mb}};
      return {{ActionKind::recv_f, stage, mb}};
    case ActionKind::backward_input:
    case ActionKind::full_backward: {
      std::vector<Action> before{{ActionKind::forward, stage, mb}};
      if (stage + 1 < s.stages())
        before.push_back(here(stage + 1) ? Action{ActionKind::backward_input, stage + 1, mb}
                                         : Action{ActionKind::recv_b, stage, mb});
      return before;
    }
    case ActionKind::send_f: return {{ActionKind::forward, stage, mb}};
    case ActionKind::send_b:
    case ActionKind::backward_weight: return {{ActionKind::backward_input, stage, mb}};
    case ActionKind::recv_f:
    case ActionKind::recv_b: break;  // a receive waits only for the other rank's send
  }
  return {};
}

void check_order(const Schedule& s, const WorkIndex& index) {
  for_each_placed(s, [&](const Placed& p) {
    for (const Action& needed : prerequisites(s, p.action)) {
      const auto it = index.find(needed);
      if (it == index.end())
        throw InvalidArgument(detail::concat(describe(p), " needs ", to_string(needed),
                                             " before it on rank ", p.rank, ", and there is none"));
      if (it->second.index > p.index)
        throw InvalidArgument(detail::concat(describe(p), " comes before ", describe(it->second),
                                             ", which it needs"));
    }
  });
}

// With everything else in order, only receives can block: replay and name each stuck one.
void check_deadlock(const Schedule& s, const WorkIndex& index) {
  const Replay run = replay(s, [](const Action&) { return 1.0; });
  if (run.complete) return;
  std::string blocked;
  for (int r = 0; r < s.ranks; ++r) {
    if (run.stopped[r] == s.per_rank[r].size()) continue;
    const Placed stuck{s.per_rank[r][run.stopped[r]], r, run.stopped[r]};
    blocked += detail::concat(blocked.empty() ? "" : "; ", describe(stuck), " waits for ",
                              describe(index.at(matching_transfer(stuck.action))));
  }
  throw InvalidArgument("deadlock, no rank can progress: " + blocked);
}

}  // namespace

void validate(const Schedule& schedule) {
  check_header(schedule);
  const WorkIndex index = index_work(schedule);
  check_complete(schedule, index);
  check_transfers_matched(schedule, index);
  check_order(schedule, index);
  check_deadlock(schedule, index);
}

}  // namespace meshtrain
