// trace_timeline: a step read back from rank traces as `meshtrain train --trace` writes them (the
// step every rank holds, each action from its first layer, the waits and the update, times from
// the earliest rank's start), the refusals of what is not such a step, the printed split of each
// rank's time, and the drawing.
#include "meshtrain/report/trace_timeline.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "meshtrain/core/error.h"
#include "meshtrain/report/svg_timeline.h"
#include "tests/report/mini_xml.h"
#include "tests/report/report_test_support.h"
#include "tests/support/scratch_dir.h"

namespace meshtrain {
namespace {

using ::testing::HasSubstr;
using testing::MiniXml;
using testing::ScratchDir;
using testing::XmlNode;

nlohmann::json span(const std::string& cat, const std::string& name, double ts, double dur,
                    int tid = 0) {
  return {{"name", name}, {"cat", cat}, {"ph", "X"}, {"ts", ts},
          {"dur", dur},   {"pid", 0},   {"tid", tid}};
}

// A pipeline action of `dur` µs from `ts`, its first layer `wait` µs after its start.
std::vector<nlohmann::json> action(const std::string& name, double ts, double dur,
                                   double wait = 0) {
  std::vector<nlohmann::json> spans = {span("other", "pipeline " + name, ts, dur),
                                       span("layer", "forward h.0", ts + wait, dur - wait),
                                       span("kernel", "linear_forward", ts + wait, 1)};
  if (wait > 0) spans.push_back(span("wait", "wait recv from 9", ts, wait));
  return spans;
}

void write_trace(const std::string& path, std::vector<std::vector<nlohmann::json>> groups,
                 const std::string& mesh = "") {
  nlohmann::json events = {
      {{"name", "process_name"}, {"ph", "M"}, {"pid", 0}, {"args", {{"name", "rank 0"}}}},
      span("comm", "send to 1", 0, 5000, 1)};  // another track: not the compute's
  for (const auto& group : groups)
    for (const nlohmann::json& e : group) events.push_back(e);
  nlohmann::json other = {{"rank", "0"}};
  if (!mesh.empty()) other["mesh"] = mesh;
  testing::write_file(path, nlohmann::json{{"otherData", other}, {"traceEvents", events}}.dump());
}

// Step 2 of a stage of a two-stage 1F1B pipeline over two micro-batches, as the fixture's ranks
// run it (below): stage 0 on rank 0, stage 1 on rank 1.
std::vector<std::vector<nlohmann::json>> stage_step(int stage) {
  if (stage == 0)
    return {{span("step", "step 2", 1000, 1000)},
            action("0F0", 1000, 100, 10),
            action("0F1", 1100, 100, 5),
            action("0B0", 1300, 200, 50),
            action("0B1", 1500, 200)};
  return {{span("step", "step 2", 1100, 900)},
          action("1F0", 1100, 100, 20),
          action("1B0", 1200, 100),
          action("1F1", 1300, 100),
          action("1B1", 1400, 100)};
}

// The drawing's transfer arrows.
std::vector<const XmlNode*> transfers_of(const std::string& svg_text, XmlNode& svg) {
  svg = MiniXml::parse(svg_text);
  std::vector<const XmlNode*> lines, out;
  svg.find_all("line", lines);
  for (const XmlNode* l : lines) {
    const auto css = l->attributes.find("class");
    if (css != l->attributes.end() && css->second == "transfer") out.push_back(l);
  }
  return out;
}

// Two pipeline ranks, two micro-batches, 1F1B; step 2 starts at 1000 µs on rank 0 and at 1100 µs
// on rank 1, and rank 0 alone holds a step 3.
class TraceTimeline : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<std::vector<nlohmann::json>> rank_0 = {{span("step", "step 1", 0, 900)},
                                                       action("0F0", 0, 100),
                                                       action("0F1", 100, 100),
                                                       action("0B0", 200, 100),
                                                       action("0B1", 300, 100)};
    for (auto& group : stage_step(0)) rank_0.push_back(std::move(group));
    rank_0.push_back(
        {span("other", "optimizer update", 1800, 100), span("wait", "wait all_reduce", 1850, 10)});
    rank_0.push_back({span("step", "step 3", 2000, 500)});
    write_trace(dir_.file("rank_0.json"), rank_0);
    std::vector<std::vector<nlohmann::json>> rank_1 = {{span("step", "step 1", 0, 900)},
                                                       action("1F0", 100, 100),
                                                       action("1B0", 200, 100),
                                                       action("1F1", 300, 100),
                                                       action("1B1", 400, 100)};
    for (auto& group : stage_step(1)) rank_1.push_back(std::move(group));
    write_trace(dir_.file("rank_1.json"), rank_1);
  }
  ScratchDir dir_;
};

std::string error_of(const std::string& dir, int64_t step) {
  try {
    read_traced_step(dir, step);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "no error";
}

TEST_F(TraceTimeline, ReadsTheLastStepEveryRankHolds) {
  const std::string dir = dir_.file("");
  const TracedStep step = read_traced_step(dir, 0);
  EXPECT_EQ(step.step, 2);
  EXPECT_EQ(step.micro_batches, 2);
  ASSERT_EQ(step.ranks.size(), 2u);
  const TracedRank& r0 = step.ranks[0];
  ASSERT_EQ(r0.actions.size(), 4u);
  const TracedAction& b0 = r0.actions[2];
  EXPECT_EQ(b0.span.name, "0B0");
  EXPECT_EQ(b0.stage, 0);
  EXPECT_EQ(b0.kind, 'B');
  EXPECT_EQ(b0.micro_batch, 0);
  EXPECT_DOUBLE_EQ(b0.span.start_ms, 0.3);
  EXPECT_DOUBLE_EQ(b0.compute_start_ms, 0.35);  // after its wait for input, at its first layer
  EXPECT_DOUBLE_EQ(b0.span.end_ms, 0.5);
  EXPECT_DOUBLE_EQ(r0.actions[3].compute_start_ms, r0.actions[3].span.start_ms);  // no wait
  ASSERT_TRUE(r0.update.has_value());
  EXPECT_DOUBLE_EQ(r0.update->start_ms, 0.8);
  ASSERT_EQ(r0.waits.size(), 4u);
  EXPECT_EQ(r0.waits[2].name, "recv from 9");
  EXPECT_EQ(r0.waits[3].name, "all_reduce");
  // Rank 1 on the same time line, from rank 0's start.
  const TracedRank& r1 = step.ranks[1];
  EXPECT_EQ(r1.rank, 1);
  EXPECT_DOUBLE_EQ(r1.step.start_ms, 0.1);
  EXPECT_DOUBLE_EQ(r1.actions[0].compute_start_ms, 0.12);
  EXPECT_EQ(r1.actions[0].stage, 1);
  EXPECT_FALSE(r1.update.has_value());
  EXPECT_EQ(step.mesh, "");  // these traces name none

  const TracedStep first = read_traced_step(dir, 1);
  EXPECT_EQ(first.step, 1);
  EXPECT_DOUBLE_EQ(first.ranks[1].actions[0].span.start_ms, 0.1);
}

TEST_F(TraceTimeline, RefusesWhatIsNotATracedPipelineStep) {
  EXPECT_THAT(error_of(dir_.file(""), 3),
              HasSubstr("step 3 is not in every rank's trace in '" + dir_.file("") +
                        "' (they hold 2 steps, 1 to 2)"));
  EXPECT_THAT(error_of(dir_.file("nope"), 0),
              HasSubstr("'" + dir_.file("nope") + "' is not a folder"));

  ScratchDir other;
  EXPECT_THAT(error_of(other.file(""), 0), HasSubstr("holds no rank_<r>.json"));
  write_trace(other.file("rank_0.json"),
              {{span("step", "step 1", 0, 900), span("layer", "forward h.0", 10, 100)}});
  EXPECT_THAT(error_of(other.file(""), 0),
              HasSubstr("step 1 in '" + other.file("") +
                        "' ran no pipeline action: was the run pipelined? train with --mesh pp="));
  testing::write_file(other.file("rank_0.json"), "{\"traceEvents\": [");
  EXPECT_THAT(error_of(other.file(""), 0),
              HasSubstr("rank_0.json' is not a trace that meshtrain train --trace wrote"));
}

TEST_F(TraceTimeline, ReportsEachRanksActionsAndTime) {
  const std::string report = traced_step_report(read_traced_step(dir_.file(""), 0));
  EXPECT_THAT(report, HasSubstr(": 2 ranks, 2 micro-batches, 1.000 ms from the first rank's"));
  EXPECT_THAT(report, HasSubstr("rank 0: 0F0 0F1 0B0 0B1\nrank 1: 1F0 1B0 1F1 1B1\n"));
  // Rank 0 computes 0.09 + 0.095 + 0.15 + 0.2 ms and waits 0.01 + 0.005 + 0.05 + 0.01.
  EXPECT_THAT(report, HasSubstr("\n   0     1.000         0.535       0.075     0.390\n"));
  EXPECT_THAT(report, HasSubstr("\n   1     0.900         0.380       0.020     0.500\n"));
}

TEST_F(TraceTimeline, DrawsActionsUpdateAndWaitsOnALanePerRank) {
  const XmlNode svg = MiniXml::parse(traced_step_svg(read_traced_step(dir_.file(""), 0)));
  std::vector<const XmlNode*> rects, boxes;
  svg.find_all("rect", rects);
  int idle = 0;
  for (const XmlNode* r : rects) {
    const auto css = r->attributes.find("class");
    if (css != r->attributes.end() && css->second == "box") boxes.push_back(r);
    if (css != r->attributes.end() && css->second == "idle") ++idle;
  }
  EXPECT_EQ(idle, 2);
  ASSERT_EQ(boxes.size(), 4u + 1u + 4u + 4u + 1u);  // actions, update, waits; rank 1's likewise
  const auto fill = [&](size_t i) { return boxes[i]->attributes.at("fill"); };
  const auto title = [&](size_t i) { return boxes[i]->children.at(0).text; };
  EXPECT_EQ(fill(0), pipeline_action_color('F'));
  EXPECT_EQ(fill(2), pipeline_action_color('B'));
  EXPECT_EQ(title(2),
            "rank 0: 0B0 computing from 0.350 to 0.500 ms, after waiting 0.050 ms on "
            "recv from 9");
  EXPECT_EQ(title(4), "rank 0: optimizer update from 0.800 to 0.900 ms");
  EXPECT_EQ(title(5),
            "rank 1: 1F0 computing from 0.120 to 0.200 ms, after waiting 0.020 ms on "
            "recv from 9");
  EXPECT_EQ(title(9), "rank 0: waited on recv from 9 from 0.000 to 0.010 ms");
  EXPECT_EQ(fill(9), fill(13));  // the waits' own colour
  EXPECT_NE(fill(9), fill(0));
  // A box spans its computing time: 0B0's 0.15 ms against 0F0's 0.09 (its 0.1 less its wait).
  const auto width = [&](size_t i) { return std::stod(boxes[i]->attributes.at("width")); };
  EXPECT_NEAR(width(2), width(0) * 0.15 / 0.09, 0.02);
}

// A transfer per forward output and backward input gradient between the two stages, each from
// its sender's end to where its receiver began computing (after its wait): downwards for the
// forwards, upwards for the backwards.
TEST_F(TraceTimeline, DrawsEachTransferFromItsSenderToItsReceiver) {
  XmlNode svg;
  const std::vector<const XmlNode*> arrows =
      transfers_of(traced_step_svg(read_traced_step(dir_.file(""), 0)), svg);
  ASSERT_EQ(arrows.size(), 4u);
  int down = 0, up = 0;
  for (const XmlNode* a : arrows) {
    const auto at = [&](const char* name) { return std::stod(a->attributes.at(name)); };
    EXPECT_LE(at("x1"), at("x2"));  // received no earlier than sent
    (at("y1") < at("y2") ? down : up) += 1;
  }
  EXPECT_EQ(down, 2);  // 0F0 -> 1F0, 0F1 -> 1F1
  EXPECT_EQ(up, 2);    // 1B0 -> 0B0, 1B1 -> 0B1
}

// Two pipelines (pp=2 x dp_shard=2: ranks 0 and 2, 1 and 3): the trace's mesh keeps each
// transfer within its pipeline. Without the mesh every receiver is ambiguous, and none is drawn.
TEST(TraceTimelineMesh, KeepsTransfersWithinEachPipeline) {
  for (const std::string mesh : {"pp=2,dp_shard=2", ""}) {
    ScratchDir dir;
    for (int rank = 0; rank < 4; ++rank)
      write_trace(dir.file("rank_" + std::to_string(rank) + ".json"), stage_step(rank / 2), mesh);
    const TracedStep step = read_traced_step(dir.file(""), 0);
    EXPECT_EQ(step.mesh, mesh);
    XmlNode svg;
    const std::vector<const XmlNode*> arrows = transfers_of(traced_step_svg(step), svg);
    if (mesh.empty()) {
      EXPECT_TRUE(arrows.empty());
      continue;
    }
    ASSERT_EQ(arrows.size(), 8u);
    std::map<std::pair<std::string, std::string>, int> between;  // lanes' y, sorted
    for (const XmlNode* a : arrows) {
      std::string y1 = a->attributes.at("y1"), y2 = a->attributes.at("y2");
      between[std::minmax(y1, y2, [](const std::string& p, const std::string& q) {
        return std::stod(p) < std::stod(q);
      })] += 1;
    }
    ASSERT_EQ(between.size(), 2u);  // lanes 0 and 2, lanes 1 and 3: 4 transfers each
    for (const auto& [lanes, count] : between) EXPECT_EQ(count, 4);
  }
}

}  // namespace
}  // namespace meshtrain
