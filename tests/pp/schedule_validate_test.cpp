// validate() and simulate() on hand-written schedules: each defect is rejected with a message that
// names the offending action, and a correct schedule's numbers come out in closed form.
#include <string>

#include <gtest/gtest.h>

#include "meshtrain/core/error.h"
#include "meshtrain/plugins/pp/schedule.h"
#include "meshtrain/plugins/pp/schedule_sim.h"
#include "tests/support/error_message.h"

namespace meshtrain {
namespace {

using testing::expect_error;

// 1F1B on two ranks with two micro-batches, and ZB-H1 on two ranks with one.
constexpr const char* k1F1B =
    "schedule ranks=2 virtual_stages=1 micro_batches=2\n"
    "rank 0: 0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1\n"
    "rank 1: 1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 1SEND_B1\n";
constexpr const char* kSplit =
    "schedule ranks=2 virtual_stages=1 micro_batches=1\n"
    "rank 0: 0F0 0SEND_F0 0RECV_B0 0I0 0W0\n"
    "rank 1: 1RECV_F0 1F0 1I0 1SEND_B0 1W0\n";

// `text` with its one occurrence of `from` replaced by `to` (a test-writing aid: fails loudly
// when `from` is not there exactly once).
std::string edited(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  EXPECT_EQ(text.find(from, at + 1), std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

void expect_invalid(const std::string& text, const std::string& fragment) {
  const Schedule s = parse_schedule(text);
  expect_error<InvalidArgument>([&] { validate(s); }, fragment);
}

TEST(ScheduleValidate, AcceptsTheExamples) {
  EXPECT_NO_THROW(validate(parse_schedule(k1F1B)));
  EXPECT_NO_THROW(validate(parse_schedule(kSplit)));
}

TEST(ScheduleValidate, MissingComputation) {
  expect_invalid(edited(k1F1B, " 1F1", ""), "missing 1F1 on rank 1");
  expect_invalid(edited(k1F1B, " 0B1", ""),
                 "missing the backward of stage 0 on micro-batch 1 on rank 0: 0B1, or 0I1 and 0W1");
  expect_invalid(edited(kSplit, " 1W0", ""), "missing 1W0 on rank 1 to go with 1I0");
}

TEST(ScheduleValidate, RepeatedWork) {
  expect_invalid(edited(k1F1B, "0F1 ", "0F1 0F1 "),
                 "duplicated work: 0F1 (rank 0, position 4) repeats 0F1 (rank 0, position 3)");
  expect_invalid(edited(kSplit, "0W0", "0W0 0B0"), "0B0 (rank 0, position 6) repeats 0I0");
}

TEST(ScheduleValidate, ReceiveWithoutSendAndSendWithoutReceive) {
  expect_invalid(edited(k1F1B, " 0SEND_F1", ""),
                 "receive 1RECV_F1 (rank 1, position 5) has no matching send 0SEND_F1");
  expect_invalid(edited(k1F1B, " 0RECV_B1", ""),
                 "send 1SEND_B1 (rank 1, position 8) has no matching receive 0RECV_B1");
}

TEST(ScheduleValidate, ComputationWithoutItsInput) {
  const std::string text = edited(edited(k1F1B, " 0SEND_F1", ""), " 1RECV_F1", "");
  expect_invalid(text, "1F1 (rank 1, position 5) needs 1RECV_F1 before it on rank 1");
}

TEST(ScheduleValidate, OrderOnARank) {
  expect_invalid(edited(kSplit, "0I0 0W0", "0W0 0I0"),
                 "0W0 (rank 0, position 4) comes before 0I0 (rank 0, position 5), which it needs");
  expect_invalid(edited(k1F1B, "1RECV_F0 1F0 1B0", "1RECV_F0 1B0 1F0"),
                 "1B0 (rank 1, position 2) comes before 1F0 (rank 1, position 3)");
  expect_invalid(edited(k1F1B, "0F1 0SEND_F1", "0SEND_F1 0F1"),
                 "0SEND_F1 (rank 0, position 3) comes before 0F1");
  expect_invalid(edited(k1F1B, "0RECV_B0 0B0", "0B0 0RECV_B0"),
                 "0B0 (rank 0, position 5) comes before 0RECV_B0");
}

// Each rank waits for the other: rank 0 wants a gradient before it sends the activations that
// rank 1 needs to produce it.
TEST(ScheduleValidate, DeadlockNamesEveryBlockedReceive) {
  expect_invalid(edited(kSplit, "0F0 0SEND_F0 0RECV_B0", "0RECV_B0 0F0 0SEND_F0"),
                 "deadlock, no rank can progress: 0RECV_B0 (rank 0, position 1) waits for "
                 "1SEND_B0 (rank 1, position 4); 1RECV_F0 (rank 1, position 1) waits for "
                 "0SEND_F0 (rank 0, position 3)");
}

TEST(ScheduleValidate, WrongRankAndOutOfRange) {
  expect_invalid(edited(k1F1B, "rank 0: 0F0", "rank 0: 1F0 0F0"),
                 "1F0 (rank 0, position 1) is on the wrong rank: stage 1 lives on rank 1");
  expect_invalid(edited(k1F1B, "0F0 ", "0F0 2F0 "), "2F0 (rank 0, position 2): stage out of range");
  expect_invalid(edited(k1F1B, "0F0 ", "0F0 0F2 "),
                 "0F2 (rank 0, position 2): micro-batch out of range");
}

TEST(ScheduleValidate, TransfersOnlyBetweenNeighboursOnOtherRanks) {
  expect_invalid(edited(k1F1B, "1SEND_B1", "1SEND_B1 1SEND_F1"),
                 "1SEND_F1 (rank 1, position 9) has no stage to talk to: stage 2 does not exist");
  expect_invalid("schedule ranks=1 virtual_stages=2 micro_batches=1\n"
                 "rank 0: 0F0 0SEND_F0 1F0 1B0 0B0\n",
                 "0SEND_F0 (rank 0, position 2) is a transfer within rank 0");
}

TEST(ScheduleValidate, ShapeOfTheSchedule) {
  Schedule s = parse_schedule(k1F1B);
  s.per_rank.pop_back();
  expect_error<InvalidArgument>([&] { validate(s); }, "one action list per rank");
  s.micro_batches = 0;
  expect_error<InvalidArgument>([&] { validate(s); }, "at least one micro-batch");
}

// Two ranks, stages F=1, I=2, W=3; rank 0 can only start its backward once rank 1 has run F and
// I: makespan = F + (F + I) + (I + W) on the critical path = 1 + 3 + 5.
TEST(ScheduleSimulate, TimesAndMemoryOfASmallSchedule) {
  const Simulation sim = simulate(parse_schedule(kSplit), Costs{1, 2, 3});
  EXPECT_DOUBLE_EQ(sim.makespan, 9);
  EXPECT_EQ(sim.busy, (std::vector<double>{6, 6}));
  EXPECT_EQ(sim.idle, (std::vector<double>{3, 3}));
  EXPECT_DOUBLE_EQ(sim.bubble_fraction, 6.0 / 18.0);
  EXPECT_EQ(sim.peak_in_flight, (std::vector<int>{1, 1}));
  EXPECT_EQ(simulate(parse_schedule(k1F1B)).peak_in_flight, (std::vector<int>{2, 1}));
}

TEST(ScheduleSimulate, RejectsBadCostsAndInvalidSchedules) {
  const Schedule s = parse_schedule(k1F1B);
  expect_error<InvalidArgument>([&] { simulate(s, Costs{1, -1, 1}); }, "non-negative",
                                "1,-1,1");
  expect_error<InvalidArgument>([&] { simulate(s, Costs{0, 0, 0}); }, "not all be zero");
  expect_error<InvalidArgument>([] { simulate(parse_schedule(edited(k1F1B, " 1F1", ""))); },
                                "missing 1F1");
}

}  // namespace
}  // namespace meshtrain
