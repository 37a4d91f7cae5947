// Schedules as text: PyTorch's action notation, one line per rank, and reading it back.
#include <string>

#include <gtest/gtest.h>

#include "meshtrain/core/error.h"
#include "meshtrain/plugins/pp/schedule.h"
#include "meshtrain/plugins/pp/schedule_generators.h"
#include "tests/support/error_message.h"

namespace meshtrain {
namespace {

using testing::expect_error;

TEST(ScheduleText, ActionNotationBothWays) {
  const std::pair<Action, const char*> cases[] = {
      {{ActionKind::forward, 1, 3}, "1F3"},
      {{ActionKind::backward_input, 0, 2}, "0I2"},
      {{ActionKind::backward_weight, 0, 2}, "0W2"},
      {{ActionKind::full_backward, 3, 0}, "3B0"},
      {{ActionKind::send_f, 0, 1}, "0SEND_F1"},
      {{ActionKind::recv_f, 1, 1}, "1RECV_F1"},
      {{ActionKind::send_b, 2, 10}, "2SEND_B10"},
      {{ActionKind::recv_b, 12, 0}, "12RECV_B0"},
  };
  for (const auto& [action, text] : cases) {
    EXPECT_EQ(to_string(action), text);
    EXPECT_EQ(parse_action(text), action) << text;
  }
}

TEST(ScheduleText, BadActionsNameTheToken) {
  for (const char* token : {"F3", "1F", "1X3", "1F3x", "1SEND3", "1f3", "-1F3", "99999999999F0"})
    expect_error<InvalidArgument>([&] { parse_action(token); }, "'", token, "'",
                                  "{stage}{kind}{micro-batch}");
}

TEST(ScheduleText, TransfersMatchAcrossNeighbouringStages) {
  EXPECT_EQ(matching_transfer(parse_action("0SEND_F1")), parse_action("1RECV_F1"));
  EXPECT_EQ(matching_transfer(parse_action("1RECV_F1")), parse_action("0SEND_F1"));
  EXPECT_EQ(matching_transfer(parse_action("2SEND_B4")), parse_action("1RECV_B4"));
  EXPECT_EQ(matching_transfer(parse_action("1RECV_B4")), parse_action("2SEND_B4"));
  expect_error<InvalidArgument>([] { matching_transfer(parse_action("1F0")); }, "1F0");
}

TEST(ScheduleText, OneLinePerRankAfterAHeader) {
  const Schedule gpipe = make_schedule(ScheduleKind::gpipe, 2, 2);
  EXPECT_EQ(gpipe.to_string(),
            "schedule ranks=2 virtual_stages=1 micro_batches=2\n"
            "rank 0: 0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1\n"
            "rank 1: 1RECV_F0 1F0 1RECV_F1 1F1 1B0 1SEND_B0 1B1 1SEND_B1\n");
}

TEST(ScheduleText, GeneratedSchedulesRoundTrip) {
  for (const ScheduleKind kind : {ScheduleKind::gpipe, ScheduleKind::one_f_one_b,
                                  ScheduleKind::interleaved, ScheduleKind::zb_h1})
    for (const int p : {1, 2, 3, 4}) {
      const int v = kind == ScheduleKind::interleaved ? 2 : 1;
      const Schedule schedule = make_schedule(kind, p, 2 * p + 1, v);
      const std::string text = schedule.to_string();
      EXPECT_EQ(parse_schedule(text), schedule) << text;
      EXPECT_EQ(parse_schedule(text).to_string(), text);
    }
}

TEST(ScheduleText, CommentsBlankLinesAndSpacing) {
  const Schedule s = parse_schedule(
      "# a hand-written schedule\n"
      "\n"
      "schedule ranks=1 virtual_stages=1 micro_batches=1   # header\n"
      "  rank 0 :0F0\t0I0  0W0\r\n");
  EXPECT_EQ(s.to_string(),
            "schedule ranks=1 virtual_stages=1 micro_batches=1\n"
            "rank 0: 0F0 0I0 0W0\n");
}

TEST(ScheduleText, EmptyRankLineIsSyntaxNotMeaning) {
  const Schedule s = parse_schedule(
      "schedule ranks=2 virtual_stages=1 micro_batches=1\n"
      "rank 0: 0F0\nrank 1:\n");
  ASSERT_EQ(s.per_rank.size(), 2u);
  EXPECT_TRUE(s.per_rank[1].empty());
}

TEST(ScheduleText, ParseErrorsNameTheLineAndWhatWasExpected) {
  const std::string header = "schedule ranks=2 virtual_stages=1 micro_batches=1\n";
  expect_error<InvalidArgument>([] { parse_schedule(""); }, "empty schedule", "schedule ranks=P");
  expect_error<InvalidArgument>([] { parse_schedule("rank 0: 0F0\n"); }, "line 1",
                                "expected the header", "rank 0: 0F0");
  expect_error<InvalidArgument>(
      [] { parse_schedule("schedule ranks=2 virtual_stages=0 micro_batches=1\n"); }, "line 1",
      "virtual_stages=0", "N >= 1");
  expect_error<InvalidArgument>(
      [] { parse_schedule("schedule ranks=2 micro_batches=1 virtual_stages=1\n"); },
      "micro_batches=1", "expected virtual_stages=N");
  expect_error<InvalidArgument>([&] { parse_schedule(header + "rank 1: 1F0\n"); }, "line 2",
                                "expected 'rank 0:'");
  expect_error<InvalidArgument>([&] { parse_schedule(header + "rank 0 0F0\n"); }, "line 2",
                                "expected 'rank 0:'");
  expect_error<InvalidArgument>(
      [&] { parse_schedule(header + "rank 0: 0F0\n\nrank 1: 1F0 1Q0\n"); }, "line 4", "rank 1",
      "'1Q0'");
  expect_error<InvalidArgument>([&] { parse_schedule(header + "rank 0: 0F0\n"); }, "1 rank lines",
                                "ranks=2");
  expect_error<InvalidArgument>([&] { parse_schedule(header + "rank 0:\nrank 1:\nrank 2:\n"); },
                                "line 4", "more rank lines than ranks=2");
}

}  // namespace
}  // namespace meshtrain
