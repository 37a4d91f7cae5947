// The sweep's rows (meshtrain/plan/sweep.h): errors as predicted / measured - 1, medians, its
// refusals, and how many layouts auto runs (the command runs them all: tests/apps/cli_test.cpp).
#include "meshtrain/plan/sweep.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "meshtrain/core/error.h"
#include "tests/support/error_message.h"
#include "tests/support/training_runs.h"

namespace meshtrain::testing {
namespace {

TEST(SweepRows, ErrorsArePredictedOverMeasured) {
  const SweepRow row{.layout = "x",
                     .measured = {.step_s = 0.2, .peak = 1000, .sent = 0},
                     .predicted = {.step_s = 0.25, .peak = 950, .sent = 0}};
  EXPECT_DOUBLE_EQ(row.step_error(), 0.25);
  EXPECT_NEAR(row.peak_error(), -0.05, 1e-15);
  EXPECT_DOUBLE_EQ(row.sent_error(), 0.0);  // nothing sent, nothing predicted
  SweepRow unmeasured = row;
  unmeasured.predicted.sent = 5;
  EXPECT_TRUE(std::isnan(unmeasured.sent_error()));
}

// One median for the steps, the rounds and the table's errors: the middle value, or the mean of
// the middle two.
TEST(SweepRows, TakeMediansOfOddAndEvenCounts) {
  EXPECT_DOUBLE_EQ(median({3.0, 1.0, 2.0}), 2.0);
  EXPECT_DOUBLE_EQ(median({4.0, 1.0, 3.0, 2.0}), 2.5);
  EXPECT_DOUBLE_EQ(median({7.0}), 7.0);
  expect_error<InvalidArgument>([] { median({}); }, "median: no values");
}

TEST(SweepRows, AutoLayoutsCoverEveryStrategyForEvenWorlds) {
  EXPECT_EQ(auto_sweep_layouts(4).size(), 13u);
  EXPECT_EQ(auto_sweep_layouts(6).size(), 12u);  // no 3D without a world divisible by 4
  expect_error<InvalidArgument>([] { auto_sweep_layouts(2); }, "at least 4 ranks, got 2");
}

TEST(SweepRows, RefuseTooFewStepsBeforeTraining) {
  TrainConfig c = uneven_config();
  c.steps = 2;
  expect_error<InvalidArgument>(
      [&] {
        sweep_layouts({{"x", c}}, machine_preset("cpu"), 1);
      },
      "at least 3 steps per layout");
  c.steps = 3;
  expect_error<InvalidArgument>(
      [&] {
        sweep_layouts({{"x", c}}, machine_preset("cpu"), 0);
      },
      "at least one round");
  expect_error<InvalidArgument>([&] { sweep_layouts({}, machine_preset("cpu"), 1); }, "no layouts");
}

// With a profile measured over the sweep: its rounds go before each of the sweep's, the profile is
// asked for once after the last, and every prediction is on it; a layout the planner refuses
// stops the sweep before the first round.
TEST(SweepRows, TakeAProfileMeasuredBetweenTheirRounds) {
  TrainConfig c = uneven_config();
  c.steps = 3;
  std::vector<std::string> events;
  MachineProfile measured = machine_preset("cpu");
  measured.name = "measured over the sweep";
  const std::vector<SweepRow> rows = sweep_layouts(
      {{"x", c}}, 2, [&] { events.push_back("round"); },
      [&] {
        events.push_back("profile");
        return measured;
      },
      [&](const SweepRow& row) { events.push_back("row " + row.layout); });
  EXPECT_EQ(events, (std::vector<std::string>{"round", "round", "profile", "row x"}));
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_GT(rows[0].measured.step_s, 0.0);
  EXPECT_EQ(rows[0].predicted.step_s,
            sweep_layouts({{"x", c}}, measured, 1).front().predicted.step_s);

  events.clear();
  c.steps = 2;
  expect_error<InvalidArgument>(
      [&] {
        sweep_layouts(
            {{"x", c}}, 1, [&] { events.push_back("round"); }, [&] { return measured; });
      },
      "at least 3 steps per layout");
  EXPECT_TRUE(events.empty());
}

}  // namespace
}  // namespace meshtrain::testing
