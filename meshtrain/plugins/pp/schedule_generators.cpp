#include "meshtrain/plugins/pp/schedule_generators.h"

#include <algorithm>

#include "meshtrain/core/error.h"
#include "meshtrain/plugins/pp/schedule_comm.h"

namespace meshtrain {
namespace {

using Actions = std::vector<Action>;

Action forward(int stage, int mb) { return {ActionKind::forward, stage, mb}; }
Action backward(int stage, int mb) { return {ActionKind::full_backward, stage, mb}; }

Actions gpipe(int rank, int m) {
  Actions out;
  for (int mb = 0; mb < m; ++mb) out.push_back(forward(rank, mb));
  for (int mb = 0; mb < m; ++mb) out.push_back(backward(rank, mb));
  return out;
}

// Rank r runs p-1-r forwards ahead (what the later ranks need before the first backward comes
// back), then alternates one forward and one backward, and so holds at most p-r micro-batches.
Actions one_f_one_b(int rank, int p, int m) {
  const int warmup = std::min(p - 1 - rank, m);
  Actions out;
  for (int mb = 0; mb < warmup; ++mb) out.push_back(forward(rank, mb));
  for (int i = 0; i < m - warmup; ++i) {
    out.push_back(forward(rank, warmup + i));
    out.push_back(backward(rank, i));
  }
  for (int mb = m - warmup; mb < m; ++mb) out.push_back(backward(rank, mb));
  return out;
}

// 1F1B with the backward split: I stays on the critical path where B was, and rank r runs each W
// r micro-batches late. Those r deferred W's fill the cool-down, where rank r waits for the
// gradients of later ranks, cutting 1F1B's idle time (p-1)(F+I+W) to about (p-1)(F+I-W), a third
// with equal costs. Rank r then holds at most p micro-batches (from F to W), as many as 1F1B
// holds on its first rank.
Actions zb_h1(int rank, int p, int m) {
  const int warmup = std::min(p - 1 - rank, m);
  Actions out;
  const auto backward_of = [&](int mb) {
    out.push_back({ActionKind::backward_input, rank, mb});
    if (mb >= rank) out.push_back({ActionKind::backward_weight, rank, mb - rank});
  };
  for (int mb = 0; mb < warmup; ++mb) out.push_back(forward(rank, mb));
  for (int i = 0; i < m - warmup; ++i) {
    out.push_back(forward(rank, warmup + i));
    backward_of(i);
  }
  for (int mb = m - warmup; mb < m; ++mb) backward_of(mb);
  for (int mb = std::max(m - rank, 0); mb < m; ++mb)
    out.push_back({ActionKind::backward_weight, rank, mb});
  return out;
}

// Interleaved micro-batches go round the ranks in groups of at least p: floor(m/p) groups whose
// sizes differ by at most one, the larger first.
std::vector<int> group_sizes(int m, int p) {
  const int groups = m / p;
  std::vector<int> sizes;
  for (int g = 0; g < groups; ++g) sizes.push_back(m / groups + (g < m % groups ? 1 : 0));
  return sizes;
}

// Megatron's interleaved 1F1B. A group passes all of rank r's stages r, r+p, ... (forward in
// stage order, backward in reverse) before the next group starts; a group of p is exactly enough
// to keep every rank busy while a micro-batch travels once round the ranks, so when p does not
// divide m the larger groups keep the bubble at its closed form (p-1)/(v*m+p-1). Warm-up as in
// Megatron: the first group's earlier stages plus 2(p-1-r), then one forward, one backward.
Actions interleaved(int rank, int p, int m, int v) {
  const std::vector<int> sizes = group_sizes(m, p);
  Actions forwards, backwards;
  for (int g = 0, first = 0; g < static_cast<int>(sizes.size()); first += sizes[g++])
    for (int chunk = 0; chunk < v; ++chunk)
      for (int mb = first; mb < first + sizes[g]; ++mb) {
        forwards.push_back(forward(chunk * p + rank, mb));
        backwards.push_back(backward((v - 1 - chunk) * p + rank, mb));
      }
  const int total = v * m;
  const int warmup = std::min((v - 1) * sizes[0] + 2 * (p - 1 - rank), total);
  Actions out(forwards.begin(), forwards.begin() + warmup);
  for (int i = 0; i < total - warmup; ++i) {
    out.push_back(forwards[warmup + i]);
    out.push_back(backwards[i]);
  }
  out.insert(out.end(), backwards.begin() + (total - warmup), backwards.end());
  return out;
}

}  // namespace

ScheduleKind parse_schedule_kind(std::string_view name) {
  for (ScheduleKind kind : {ScheduleKind::gpipe, ScheduleKind::one_f_one_b,
                            ScheduleKind::interleaved, ScheduleKind::zb_h1})
    if (name == schedule_kind_name(kind)) return kind;
  throw InvalidArgument(detail::concat("unknown pipeline schedule '", name,
                                       "', expected gpipe, 1f1b, interleaved or zb-h1"));
}

std::string_view schedule_kind_name(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::gpipe: return "gpipe";
    case ScheduleKind::one_f_one_b: return "1f1b";
    case ScheduleKind::interleaved: return "interleaved";
    case ScheduleKind::zb_h1: return "zb-h1";
  }
  return "unknown";
}

Schedule make_schedule(ScheduleKind kind, int ranks, int micro_batches, int virtual_stages) {
  const std::string_view name = schedule_kind_name(kind);
  MT_CHECK(ranks >= 1, "a pipeline needs at least one rank, got ", ranks);
  MT_CHECK(micro_batches >= 1, "a step needs at least one micro-batch, got ", micro_batches);
  if (kind == ScheduleKind::interleaved) {
    MT_CHECK(virtual_stages >= 2,
             "interleaved needs at least 2 virtual stages per rank (with 1 it is 1f1b), got ",
             virtual_stages);
    MT_CHECK(micro_batches >= ranks,
             "interleaved needs at least as many micro-batches as pipeline ranks (they go round "
             "the ranks in groups of at least one per rank), got ", micro_batches,
             " micro-batches for ", ranks, " ranks");
  } else {
    MT_CHECK(virtual_stages == 1, name,
             " runs one stage per rank; only interleaved takes virtual stages, got ",
             virtual_stages);
  }
  // Each (stage, micro-batch) pair is a forward, a backward and up to four transfers; the
  // simulator and the checks walk them all. Past this the schedule would take gigabytes.
  const int64_t actions = int64_t{6} * ranks * micro_batches * virtual_stages;
  MT_CHECK(actions <= kMaxScheduleActions, name, " with ", ranks, " ranks x ", micro_batches,
           " micro-batches x ", virtual_stages, " virtual stages has about ", actions,
           " actions; at most ", kMaxScheduleActions,
           " are built (fewer micro-batches or virtual stages per step)");
  Schedule compute{ranks, virtual_stages, micro_batches, {}};
  for (int rank = 0; rank < ranks; ++rank) {
    switch (kind) {
      case ScheduleKind::gpipe: compute.per_rank.push_back(gpipe(rank, micro_batches)); break;
      case ScheduleKind::one_f_one_b:
        compute.per_rank.push_back(one_f_one_b(rank, ranks, micro_batches));
        break;
      case ScheduleKind::interleaved:
        compute.per_rank.push_back(interleaved(rank, ranks, micro_batches, virtual_stages));
        break;
      case ScheduleKind::zb_h1:
        compute.per_rank.push_back(zb_h1(rank, ranks, micro_batches));
        break;
    }
  }
  return add_communication(compute);
}

Schedule make_forward_schedule(int ranks, int micro_batches, int virtual_stages) {
  MT_CHECK(ranks >= 1 && micro_batches >= 1 && virtual_stages >= 1,
           "a forward pass needs at least one rank, micro-batch and stage per rank, got ", ranks,
           ", ", micro_batches, " and ", virtual_stages);
  const int64_t actions = int64_t{3} * ranks * micro_batches * virtual_stages;
  MT_CHECK(actions <= kMaxScheduleActions, "a forward pass over ", ranks, " ranks x ",
           micro_batches, " micro-batches x ", virtual_stages, " virtual stages has about ",
           actions, " actions; at most ", kMaxScheduleActions, " are built");
  Schedule compute{ranks, virtual_stages, micro_batches, {}};
  for (int rank = 0; rank < ranks; ++rank) {
    Actions out;
    for (int chunk = 0; chunk < virtual_stages; ++chunk)
      for (int mb = 0; mb < micro_batches; ++mb) out.push_back(forward(chunk * ranks + rank, mb));
    compute.per_rank.push_back(std::move(out));
  }
  return add_communication(compute);
}

}  // namespace meshtrain
