// The generated schedules: all valid, bubbles in closed form, activations held as the papers say.
#include "meshtrain/plugins/pp/schedule_generators.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "meshtrain/core/error.h"
#include "meshtrain/plugins/pp/schedule_comm.h"
#include "meshtrain/plugins/pp/schedule_replay.h"
#include "meshtrain/plugins/pp/schedule_sim.h"
#include "tests/support/error_message.h"

namespace meshtrain {
namespace {

using testing::expect_error;

constexpr ScheduleKind kAllKinds[] = {ScheduleKind::gpipe, ScheduleKind::one_f_one_b,
                                      ScheduleKind::interleaved, ScheduleKind::zb_h1};

std::string label(ScheduleKind kind, int p, int m, int v = 1) {
  return std::string(schedule_kind_name(kind)) + " p=" + std::to_string(p) +
         " m=" + std::to_string(m) + " v=" + std::to_string(v);
}

TEST(ScheduleGenerators, KindNamesBothWays) {
  for (const ScheduleKind kind : kAllKinds)
    EXPECT_EQ(parse_schedule_kind(schedule_kind_name(kind)), kind);
  expect_error<InvalidArgument>([] { parse_schedule_kind("zb-v"); }, "'zb-v'",
                                "gpipe, 1f1b, interleaved or zb-h1");
}

TEST(ScheduleGenerators, EveryScheduleValidates) {
  for (const ScheduleKind kind : kAllKinds)
    for (int p = 1; p <= 5; ++p)
      for (int m = 1; m <= 3 * p + 1; ++m)
        for (int v = 1; v <= 3; ++v) {
          const bool interleaved = kind == ScheduleKind::interleaved;
          if (interleaved ? (v == 1 || m < p) : v > 1) continue;  // rejected, tested below
          const Schedule s = make_schedule(kind, p, m, v);
          EXPECT_NO_THROW(validate(s)) << label(kind, p, m, v) << "\n" << s.to_string();
          EXPECT_EQ(s.stages(), p * v);
        }
}

// Pins the exact orders of the smallest interesting cases; the other tests check properties.
TEST(ScheduleGenerators, SmallSchedulesExactly) {
  EXPECT_EQ(
      make_schedule(ScheduleKind::one_f_one_b, 2, 3).to_string(),
      "schedule ranks=2 virtual_stages=1 micro_batches=3\n"
      "rank 0: 0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0F2 0SEND_F2 0RECV_B1 0B1 0RECV_B2 0B2\n"
      "rank 1: 1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 1SEND_B1 1RECV_F2 1F2 1B2 1SEND_B2\n");
  EXPECT_EQ(make_schedule(ScheduleKind::zb_h1, 2, 3).to_string(),
            "schedule ranks=2 virtual_stages=1 micro_batches=3\n"
            "rank 0: 0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0I0 0W0 0F2 0SEND_F2 0RECV_B1 0I1 0W1 "
            "0RECV_B2 0I2 0W2\n"
            "rank 1: 1RECV_F0 1F0 1I0 1SEND_B0 1RECV_F1 1F1 1I1 1SEND_B1 1W0 1RECV_F2 1F2 1I2 "
            "1SEND_B2 1W1 1W2\n");
  EXPECT_EQ(make_schedule(ScheduleKind::interleaved, 2, 2, 2).to_string(),
            "schedule ranks=2 virtual_stages=2 micro_batches=2\n"
            "rank 0: 0F0 0SEND_F0 0F1 0SEND_F1 2RECV_F0 2F0 2SEND_F0 2RECV_F1 2F1 2SEND_F1 "
            "2RECV_B0 2B0 2SEND_B0 2RECV_B1 2B1 2SEND_B1 0RECV_B0 0B0 0RECV_B1 0B1\n"
            "rank 1: 1RECV_F0 1F0 1SEND_F0 1RECV_F1 1F1 1SEND_F1 3RECV_F0 3F0 3B0 3SEND_B0 "
            "3RECV_F1 3F1 3B1 3SEND_B1 1RECV_B0 1B0 1SEND_B0 1RECV_B1 1B1 1SEND_B1\n");
}

// Validation's forward pass: every stage's forward of every micro-batch once, stage by stage on
// each rank, each remote activation sent once and received once.
TEST(ScheduleGenerators, ForwardOnlyPass) {
  EXPECT_EQ(make_forward_schedule(2, 2, 2).to_string(),
            "schedule ranks=2 virtual_stages=2 micro_batches=2\n"
            "rank 0: 0F0 0SEND_F0 0F1 0SEND_F1 2RECV_F0 2F0 2SEND_F0 2RECV_F1 2F1 2SEND_F1\n"
            "rank 1: 1RECV_F0 1F0 1SEND_F0 1RECV_F1 1F1 1SEND_F1 3RECV_F0 3F0 3RECV_F1 3F1\n");
  for (int p = 1; p <= 4; ++p)
    for (int m = 1; m <= 5; ++m)
      for (int v = 1; v <= 3; ++v) {
        const Schedule s = make_forward_schedule(p, m, v);
        int forwards = 0, sends = 0, receives = 0;
        for (const std::vector<Action>& actions : s.per_rank)
          for (const Action& a : actions) {
            forwards += a.kind == ActionKind::forward;
            sends += a.kind == ActionKind::send_f;
            receives += a.kind == ActionKind::recv_f;
            EXPECT_TRUE(a.kind == ActionKind::forward || a.kind == ActionKind::send_f ||
                        a.kind == ActionKind::recv_f)
                << to_string(a);
          }
        EXPECT_EQ(forwards, p * v * m) << "p=" << p << " m=" << m << " v=" << v;
        // Every stage boundary crosses ranks, except with one rank.
        EXPECT_EQ(sends, p == 1 ? 0 : (p * v - 1) * m) << "p=" << p << " m=" << m << " v=" << v;
        EXPECT_EQ(receives, sends);
        // Replayed with blocking receives, every rank reaches its end: no deadlock.
        EXPECT_TRUE(replay(s, [](const Action&) { return 1.0; }).complete)
            << "p=" << p << " m=" << m << " v=" << v;
      }
}

// Closed forms with stages of equal cost: GPipe and 1F1B idle (p-1)/(m+p-1) of the time,
// interleaved (p-1)/(v*m+p-1). They hold for any F, I, W, so two cost sets are checked, and for
// every m from p to 3p+1 (p, 2p, odd counts, and interleaved groups of unequal size).
TEST(ScheduleGenerators, BubbleFractionsMatchTheClosedForms) {
  for (const Costs costs : {Costs{1, 1, 1}, Costs{2, 3, 1}})
    for (const int p : {2, 4})
      for (int m = p; m <= 3 * p + 1; ++m) {
        const double flat = double(p - 1) / (m + p - 1);
        for (const ScheduleKind kind : {ScheduleKind::gpipe, ScheduleKind::one_f_one_b})
          EXPECT_NEAR(simulate(make_schedule(kind, p, m), costs).bubble_fraction, flat, 1e-12)
              << label(kind, p, m);
        for (const int v : {2, 3})
          EXPECT_NEAR(
              simulate(make_schedule(ScheduleKind::interleaved, p, m, v), costs).bubble_fraction,
              double(p - 1) / (v * m + p - 1), 1e-12)
              << label(ScheduleKind::interleaved, p, m, v);
      }
}

// Every rank idles (p-1)(F+B) in GPipe and 1F1B, and the simulator's sums agree with the fraction.
TEST(ScheduleGenerators, IdleTimePerRank) {
  const Simulation sim = simulate(make_schedule(ScheduleKind::one_f_one_b, 4, 8), Costs{1, 2, 1});
  EXPECT_DOUBLE_EQ(sim.makespan, (8 + 3) * 4.0);
  for (int r = 0; r < 4; ++r) {
    EXPECT_DOUBLE_EQ(sim.busy[r], 8 * 4.0);
    EXPECT_DOUBLE_EQ(sim.idle[r], 3 * 4.0);
  }
}

// The timeline behind those sums: every action of every rank once, in its order, computations
// lasting their cost, a receive done once its send was posted; rank r starts its first forward
// after r forwards upstream.
TEST(ScheduleGenerators, TimelineHoldsEveryActionAtItsTime) {
  const Schedule schedule = make_schedule(ScheduleKind::one_f_one_b, 4, 8);
  const Simulation sim = simulate(schedule, Costs{1, 2, 1});
  ASSERT_EQ(sim.timeline.size(), 4u);
  std::map<Action, double> posted;
  for (int r = 0; r < 4; ++r)
    for (const TimedAction& a : sim.timeline[r])
      if (is_send(a.action.kind)) posted[a.action] = a.end;
  for (int r = 0; r < 4; ++r) {
    const std::vector<TimedAction>& line = sim.timeline[r];
    ASSERT_EQ(line.size(), schedule.per_rank[r].size());
    double busy = 0, free = 0, end = 0;
    for (size_t i = 0; i < line.size(); ++i) {
      const TimedAction& a = line[i];
      EXPECT_EQ(a.action, schedule.per_rank[r][i]);
      EXPECT_GE(a.start, free);
      if (is_recv(a.action.kind)) {
        EXPECT_GE(a.end, posted.at(matching_transfer(a.action)));
      }
      busy += a.end - a.start;
      free = end = a.end;
    }
    EXPECT_DOUBLE_EQ(busy, sim.busy[r]);
    const auto first_forward = std::find_if(line.begin(), line.end(), [](const TimedAction& a) {
      return a.action.kind == ActionKind::forward;
    });
    EXPECT_DOUBLE_EQ(first_forward->start, r * 1.0);
    if (r == 0) {
      EXPECT_DOUBLE_EQ(end, sim.makespan);
    }
  }
}

// Stages of unequal cost (the planner's): GPipe over 2 ranks with one micro-batch runs F on
// stage 0, F and B on stage 1, B on stage 0 in sequence; with 3 micro-batches the slow stage sets
// the pace: 1 + 3 m forwards and as many backwards.
TEST(ScheduleGenerators, SimulateWithACostPerComputation) {
  const auto cost = [](const Action& a) {
    const double stage = a.stage == 0 ? 1.0 : 3.0;
    return a.kind == ActionKind::forward ? stage : 2 * stage;
  };
  EXPECT_DOUBLE_EQ(simulate(make_schedule(ScheduleKind::gpipe, 2, 1), cost).makespan,
                   1 + 3 + 6 + 2);
  const Simulation sim = simulate(make_schedule(ScheduleKind::gpipe, 2, 3), cost);
  EXPECT_DOUBLE_EQ(sim.makespan, (1 + 3 * 3) + (3 * 6 + 2));
  EXPECT_DOUBLE_EQ(sim.busy[1], 3 * (3 + 6));
  expect_error<InvalidArgument>(
      [] {
        simulate(make_schedule(ScheduleKind::gpipe, 2, 1), [](const Action&) { return -1.0; });
      },
      "the cost of 0F0 must be finite and non-negative, got -1");
}

// A processor shared as the schedule runs. At full speed throughout it is the plain replay, action
// for action. With one core shared fairly among whoever computes (speed 1/k), the core never
// idles while a rank has work it can do, and some rank always can until the end: the makespan is
// the total work, each rank computing for at least its own.
TEST(ScheduleGenerators, SimulateWithASharedProcessor) {
  const auto cost = [](const Action& a) {
    const double stage = 1.0 + 0.5 * a.stage;
    return a.kind == ActionKind::forward ? stage : 2 * stage;
  };
  const ComputeSpeed full = [](const std::vector<bool>&, int) { return 1.0; };
  const ComputeSpeed one_core = [](const std::vector<bool>& computing, int) {
    return 1.0 / static_cast<double>(std::count(computing.begin(), computing.end(), true));
  };
  for (const ScheduleKind kind : kAllKinds)
    for (const int p : {2, 3, 4}) {
      const int v = kind == ScheduleKind::interleaved ? 2 : 1;
      const Schedule schedule = make_schedule(kind, p, 2 * p, v);
      const Simulation plain = simulate(schedule, cost);
      const Simulation alike = simulate(schedule, cost, full);
      EXPECT_DOUBLE_EQ(alike.makespan, plain.makespan) << label(kind, p, 2 * p, v);
      for (int r = 0; r < p; ++r) {
        ASSERT_EQ(alike.timeline[r].size(), plain.timeline[r].size());
        for (size_t i = 0; i < plain.timeline[r].size(); ++i) {
          EXPECT_EQ(alike.timeline[r][i].action, plain.timeline[r][i].action);
          EXPECT_NEAR(alike.timeline[r][i].end, plain.timeline[r][i].end, 1e-9);
        }
        EXPECT_NEAR(alike.busy[r], plain.busy[r], 1e-9);
      }
      const Simulation shared = simulate(schedule, cost, one_core);
      double work = 0;
      for (const double busy : plain.busy) work += busy;
      EXPECT_NEAR(shared.makespan, work, 1e-9) << label(kind, p, 2 * p, v);
      for (int r = 0; r < p; ++r) EXPECT_GE(shared.busy[r], plain.busy[r] - 1e-9);
    }
  expect_error<InvalidArgument>(
      [&] {
        simulate(make_schedule(ScheduleKind::gpipe, 2, 1), cost,
                 [](const std::vector<bool>&, int) { return 1.5; });
      },
      "a compute speed must lie in (0, 1], got 1.5 for rank 0");
}

// Zero Bubble's claim: deferring W cuts 1F1B's idle time (p-1)(F+I+W) to (p-1)(F+I-W), a third
// with equal costs, on every rank, while every rank holds p micro-batches, as 1F1B's first does.
TEST(ScheduleGenerators, ZeroBubbleH1IdlesAThirdOf1F1B) {
  for (const int p : {2, 3, 4, 8})
    for (int m = p; m <= 3 * p; ++m) {
      const Simulation zb = simulate(make_schedule(ScheduleKind::zb_h1, p, m));
      const Simulation f1b = simulate(make_schedule(ScheduleKind::one_f_one_b, p, m));
      for (int r = 0; r < p; ++r) {
        EXPECT_LE(zb.idle[r], f1b.idle[r] / 3 + 1e-9) << label(ScheduleKind::zb_h1, p, m);
        EXPECT_EQ(zb.peak_in_flight[r], f1b.peak_in_flight[0]);
      }
      EXPECT_NEAR(zb.makespan, 3.0 * m + (p - 1), 1e-12) << label(ScheduleKind::zb_h1, p, m);
    }
}

// What 1F1B is for: the first rank holds p micro-batches' activations where GPipe holds all m.
TEST(ScheduleGenerators, PeakActivationsOf1F1BAndGPipe) {
  for (const int p : {2, 4})
    for (int m = p; m <= 3 * p + 1; ++m) {
      const Simulation f1b = simulate(make_schedule(ScheduleKind::one_f_one_b, p, m));
      const Simulation gpipe = simulate(make_schedule(ScheduleKind::gpipe, p, m));
      for (int r = 0; r < p; ++r) {
        EXPECT_EQ(f1b.peak_in_flight[r], p - r) << label(ScheduleKind::one_f_one_b, p, m);
        EXPECT_EQ(gpipe.peak_in_flight[r], m) << label(ScheduleKind::gpipe, p, m);
      }
    }
}

// Megatron's warm-up: rank r runs (v-1)*p + 2(p-1-r) forwards before its first backward, and
// holds one more stage's micro-batch at the first steady forward.
TEST(ScheduleGenerators, InterleavedPeakFollowsMegatronsWarmup) {
  const Simulation sim = simulate(make_schedule(ScheduleKind::interleaved, 4, 8, 2));
  EXPECT_EQ(sim.peak_in_flight, (std::vector<int>{11, 9, 7, 5}));
}

TEST(ScheduleGenerators, OneRankNeedsNoTransfers) {
  for (const ScheduleKind kind : kAllKinds) {
    const Schedule s = make_schedule(kind, 1, 3, kind == ScheduleKind::interleaved ? 2 : 1);
    for (const Action& a : s.per_rank[0]) EXPECT_TRUE(is_compute(a.kind)) << to_string(a);
    EXPECT_DOUBLE_EQ(simulate(s).bubble_fraction, 0.0);
  }
}

TEST(ScheduleGenerators, RejectsWhatTheyDoNotSupport) {
  expect_error<InvalidArgument>([] { make_schedule(ScheduleKind::interleaved, 4, 8, 1); },
                                "at least 2 virtual stages");
  expect_error<InvalidArgument>([] { make_schedule(ScheduleKind::interleaved, 4, 3, 2); },
                                "at least as many micro-batches as pipeline ranks",
                                "got 3 micro-batches for 4 ranks");
  expect_error<InvalidArgument>([] { make_schedule(ScheduleKind::zb_h1, 4, 8, 2); },
                                "zb-h1 runs one stage per rank");
  expect_error<InvalidArgument>([] { make_schedule(ScheduleKind::gpipe, 0, 8); },
                                "at least one rank");
  expect_error<InvalidArgument>([] { make_schedule(ScheduleKind::one_f_one_b, 2, 0); },
                                "at least one micro-batch");
  // Before: 26 s of building to an out-of-memory error (issue 25).
  expect_error<InvalidArgument>(
      [] { make_schedule(ScheduleKind::interleaved, 1024, 1024, 1024); },
      "1024 ranks x 1024 micro-batches x 1024 virtual stages", "at most 16777216 are built");
}

TEST(ScheduleGenerators, AddCommunicationTakesComputationsOnly) {
  const Schedule s = make_schedule(ScheduleKind::gpipe, 2, 1);
  expect_error<InvalidArgument>([&] { add_communication(s); }, "computations only",
                                "0SEND_F0 on rank 0");
}

}  // namespace
}  // namespace meshtrain
