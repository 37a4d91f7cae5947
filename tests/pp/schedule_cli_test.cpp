// `meshtrain schedule`: prints a schedule with its bubble and peak activations, checks a
// hand-written one, draws a traced run's step, and ends bad input with a message and a non-zero
// exit.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "tests/apps/apps_test_support.h"
#include "tests/report/mini_xml.h"

namespace meshtrain {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing::CliResult;
using testing::ScratchDir;

CliResult run_cli(const ScratchDir& dir, const std::string& args) {
  return testing::run_cli(MESHTRAIN_CLI, dir, args);
}

class ScheduleCli : public ::testing::Test {
 protected:
  ScratchDir dir_;
};

TEST_F(ScheduleCli, PrintsScheduleBubbleAndPeaks) {
  const CliResult r = run_cli(dir_, "schedule --pp 2 --microbatches 2 --schedule 1f1b");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "schedule ranks=2 virtual_stages=1 micro_batches=2\n"
            "rank 0: 0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1\n"
            "rank 1: 1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 1SEND_B1\n"
            "\n"
            "costs F=1 I=1 W=1 (B = I + W), makespan 9, bubble fraction 0.3333\n"
            "rank  busy  idle  peak activations (micro-batches held, counted per stage)\n"
            "   0     6     3     2\n"
            "   1     6     3     1\n");
}

TEST_F(ScheduleCli, InterleavedDefaultsToTwoVirtualStagesAndTakesCosts) {
  const CliResult r = run_cli(
      dir_, "schedule --pp 4 --microbatches 8 --schedule interleaved --costs 1,2,0.5");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, StartsWith("schedule ranks=4 virtual_stages=2 micro_batches=8\n"));
  EXPECT_THAT(r.out, HasSubstr("costs F=1 I=2 W=0.5 (B = I + W)"));
  EXPECT_THAT(r.out, HasSubstr("bubble fraction 0.1579\n"));  // 3 / (2 * 8 + 3)
}

TEST_F(ScheduleCli, ChecksAScheduleFromAFile) {
  const std::string path = dir_.file("custom.txt");
  testing::write_text(path,
                      "# ZB-H1 by hand\n"
                      "schedule ranks=2 virtual_stages=1 micro_batches=1\n"
                      "rank 0: 0F0 0SEND_F0 0RECV_B0 0I0 0W0\n"
                      "rank 1: 1RECV_F0 1F0 1I0 1SEND_B0 1W0\n");
  const CliResult ok = run_cli(dir_, "schedule --file '" + path + "' --costs 1,2,3");
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_THAT(ok.out, HasSubstr("makespan 9, bubble fraction 0.3333"));

  testing::write_text(path,
                      "schedule ranks=2 virtual_stages=1 micro_batches=1\n"
                      "rank 0: 0F0 0SEND_F0 0RECV_B0 0W0 0I0\n"
                      "rank 1: 1RECV_F0 1F0 1I0 1SEND_B0 1W0\n");
  const CliResult bad = run_cli(dir_, "schedule --file '" + path + "'");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_EQ(bad.out, "");
  EXPECT_THAT(bad.err, HasSubstr("meshtrain: error: 0W0 (rank 0, position 4) comes before 0I0"));

  testing::write_text(path, "schedule ranks=1 virtual_stages=1 micro_batches=1\nrank 0: 0F0 0Z0\n");
  const CliResult unreadable = run_cli(dir_, "schedule --file '" + path + "'");
  EXPECT_EQ(unreadable.exit_code, 1);
  EXPECT_THAT(unreadable.err, HasSubstr("custom.txt: schedule line 2 (rank 0): bad action '0Z0'"));
}

TEST_F(ScheduleCli, BadInputEndsWithAMessage) {
  const std::pair<const char*, const char*> cases[] = {
      {"schedule --pp 2 --microbatches 4 --schedule zb-v", "unknown pipeline schedule 'zb-v'"},
      {"schedule --pp 2 --microbatches 4", "--pp, --microbatches and --schedule, or --file"},
      {"schedule --pp 4 --microbatches 2 --schedule interleaved",
       "at least as many micro-batches as pipeline ranks"},
      {"schedule --pp 2 --microbatches 4 --schedule gpipe --virtual 2",
       "gpipe runs one stage per rank"},
      {"schedule --pp 2 --microbatches 4 --schedule gpipe --costs 1,2", "--costs expects F,I,W"},
      {"schedule --pp 2 --microbatches 4 --schedule gpipe --costs 1,-2,1", "got '1,-2,1'"},
      {"schedule --pp 0 --microbatches 4 --schedule gpipe", "--pp"},
      {"schedule --file /nonexistent/schedule.txt", "/nonexistent/schedule.txt"},
      {"schedule --pp 2 --file /dev/null", "excludes"},
      {"schedule --trace /nonexistent/trace", "'/nonexistent/trace' is not a folder"},
      {"schedule --trace /tmp --microbatches 4", "excludes"},
      {"schedule --pp 2 --microbatches 4 --schedule gpipe --step 2", "--step requires --trace"},
  };
  for (const auto& [args, message] : cases) {
    const CliResult r = run_cli(dir_, args);
    EXPECT_NE(r.exit_code, 0) << args;
    EXPECT_THAT(r.err, HasSubstr(message)) << args;
    EXPECT_EQ(r.out, "") << args;
  }
}

// --svg draws the replayed schedule: a box per computation, an arrow per transfer, a grey lane
// per rank; it never writes over the schedule file it draws.
TEST_F(ScheduleCli, DrawsTheScheduleAsATimeline) {
  const std::string svg = dir_.file("schedule.svg");
  const CliResult r =
      run_cli(dir_, "schedule --pp 4 --microbatches 8 --schedule 1f1b --svg '" + svg + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("bubble fraction"));  // the report as without --svg
  const testing::XmlNode root = testing::MiniXml::parse(testing::read_text(svg));
  std::vector<const testing::XmlNode*> rects, lines;
  root.find_all("rect", rects);
  root.find_all("line", lines);
  const auto count = [](const std::vector<const testing::XmlNode*>& nodes, const char* css) {
    return std::count_if(nodes.begin(), nodes.end(), [&](const testing::XmlNode* n) {
      return n->attributes.count("class") && n->attributes.at("class") == css;
    });
  };
  EXPECT_EQ(count(rects, "box"), 4 * 8 * 2);  // F and B of 8 micro-batches on 4 ranks
  EXPECT_EQ(count(rects, "idle"), 4);
  EXPECT_EQ(count(lines, "transfer"), 2 * 3 * 8);  // activations and gradients over 3 links
  EXPECT_THAT(root.children.size(), ::testing::Gt(0u));

  const std::string file = dir_.file("custom.txt");
  testing::write_text(file,
                      "schedule ranks=1 virtual_stages=1 micro_batches=1\n"
                      "rank 0: 0F0 0B0\n");
  const CliResult same = run_cli(dir_, "schedule --file '" + file + "' --svg '" + file + "'");
  EXPECT_NE(same.exit_code, 0);
  EXPECT_THAT(same.err, HasSubstr("--svg"));
  EXPECT_EQ(testing::read_text(file),
            "schedule ranks=1 virtual_stages=1 micro_batches=1\nrank 0: 0F0 0B0\n");
}

// --trace reads a pipelined run's traces back: a lane per rank, an F and a B box for every
// micro-batch as the run executed them, an arrow per transfer; a run that was not pipelined is
// refused.
TEST_F(ScheduleCli, DrawsATracedRunsStep) {
  testing::write_text(dir_.file("text.txt"), testing::sample_prose(10));
  const std::string tokens = dir_.file("tokens.bin");
  ASSERT_EQ(run_cli(dir_, "prepare '" + dir_.file("text.txt") + "' '" + tokens + "'").exit_code, 0);
  const std::string train = "train --data '" + tokens +
                            "' --model demo --steps 2 --batch 4 --seq 16 --world 2 --sample 0 "
                            "--quiet --microbatches 2 ";
  const std::string trace = dir_.file("trace"), svg = dir_.file("step.svg");
  CliResult r = run_cli(dir_, train + "--mesh pp=2 --trace '" + trace + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;

  r = run_cli(dir_, "schedule --trace '" + trace + "' --svg '" + svg + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, StartsWith("step 2 of " + trace + ": 2 ranks, 2 micro-batches, "));
  EXPECT_THAT(r.out, HasSubstr("\nrank 0: 0F0 0F1 0B0 0B1\nrank 1: 1F0 1B0 1F1 1B1\n"));
  const testing::XmlNode root = testing::MiniXml::parse(testing::read_text(svg));
  std::vector<const testing::XmlNode*> rects;
  root.find_all("rect", rects);
  int idle = 0;
  std::vector<std::string> boxes;  // their tooltips
  for (const testing::XmlNode* n : rects) {
    if (!n->attributes.count("class")) continue;
    if (n->attributes.at("class") == "idle") ++idle;
    if (n->attributes.at("class") == "box") boxes.push_back(n->children.at(0).text);
  }
  EXPECT_EQ(idle, 2);
  for (const std::string rank : {"0", "1"})
    for (const std::string kind : {"F", "B"})
      for (const std::string micro_batch : {"0", "1"}) {
        const std::string tooltip =
            "rank " + rank + ": " + rank + kind + micro_batch + " computing";
        EXPECT_EQ(std::count_if(boxes.begin(), boxes.end(),
                                [&](const std::string& b) { return b.starts_with(tooltip); }),
                  1)
            << tooltip;
      }
  std::vector<const testing::XmlNode*> lines;
  root.find_all("line", lines);
  // Each micro-batch's forward output down and its gradient back up.
  EXPECT_EQ(std::count_if(lines.begin(), lines.end(),
                          [](const testing::XmlNode* l) {
                            return l->attributes.count("class") &&
                                   l->attributes.at("class") == "transfer";
                          }),
            2 * 2);

  EXPECT_THAT(run_cli(dir_, "schedule --trace '" + trace + "' --step 1").out,
              StartsWith("step 1 of "));
  r = run_cli(dir_, "schedule --trace '" + trace + "' --step 3");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("step 3 is not in every rank's trace"));

  const std::string flat = dir_.file("flat");
  ASSERT_EQ(run_cli(dir_, train + "--mesh dp_shard=2 --trace '" + flat + "'").exit_code, 0);
  r = run_cli(dir_, "schedule --trace '" + flat + "'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("was the run pipelined? train with --mesh pp="));
}

}  // namespace
}  // namespace meshtrain
