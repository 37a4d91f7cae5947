// svg_timeline: well-formed XML whatever the labels hold, each box where its times put it on its
// lane, every lane's idle background, an arrow per transfer, and refusals of boxes that do not fit.
#include "meshtrain/report/svg_timeline.h"

#include <gtest/gtest.h>

#include "meshtrain/core/error.h"
#include "tests/report/mini_xml.h"

namespace meshtrain {
namespace {

using testing::MiniXml;
using testing::XmlNode;

Timeline two_lanes() {
  Timeline t;
  t.title = "a <timeline> & more";
  t.time_unit = "time";
  t.lanes = {"rank 0", "rank 1"};
  t.boxes = {{0, 0, 1, "0F0", "#1f77b4", "rank 0: 0F0"},
             {1, 1, 2, "1F0", "#1f77b4", "rank 1: 1F0"},
             {1, 2, 4, "1B0", "#2ca02c", "rank 1: 1B0 \"full\""},
             {0, 4, 6, "0B0", "#2ca02c", "rank 0: 0B0"}};
  t.arrows = {{0, 1, 1, 1}, {1, 4, 0, 4}};
  t.legend = {{"F: forward", "#1f77b4"}, {"B: backward", "#2ca02c"}};
  return t;
}

TEST(SvgTimeline, DrawsEveryBoxOnItsLaneAtItsTimes) {
  const XmlNode svg = MiniXml::parse(svg_timeline(two_lanes()));
  EXPECT_EQ(svg.name, "svg");
  const std::vector<const XmlNode*> boxes = svg.find_with_class("rect", "box");
  const std::vector<const XmlNode*> idle = svg.find_with_class("rect", "idle");
  ASSERT_EQ(boxes.size(), 4u);
  ASSERT_EQ(idle.size(), 2u);
  EXPECT_EQ(svg.find_with_class("line", "transfer").size(), 2u);
  // One scale: box widths in proportion to their durations, starts in order of their times.
  const auto x = [](const XmlNode* n) { return std::stod(n->attributes.at("x")); };
  const auto width = [](const XmlNode* n) { return std::stod(n->attributes.at("width")); };
  EXPECT_NEAR(width(boxes[2]), 2 * width(boxes[0]), 0.02);
  EXPECT_NEAR(x(boxes[1]) - x(boxes[0]), width(boxes[0]), 0.02);
  EXPECT_NEAR(x(boxes[3]) + width(boxes[3]), x(idle[0]) + width(idle[0]), 0.02);  // ends at 6
  // A box sits on its lane's row.
  EXPECT_EQ(boxes[0]->attributes.at("y"), idle[0]->attributes.at("y"));
  EXPECT_EQ(boxes[1]->attributes.at("y"), idle[1]->attributes.at("y"));
  EXPECT_EQ(boxes[2]->children.at(0).text, "rank 1: 1B0 \"full\"");  // the tooltip, unescaped
}

// A short timeline with a long legend widens the drawing rather than cutting the legend off.
TEST(SvgTimeline, TheLegendFitsTheDrawing) {
  Timeline t = two_lanes();
  t.legend = pipeline_legend();
  t.legend.push_back({std::string(200, 'x'), "#000"});
  const XmlNode svg = MiniXml::parse(svg_timeline(t));
  EXPECT_GT(std::stod(svg.attributes.at("width")), 200 * 6.5);
  EXPECT_EQ(pipeline_legend().front().color, pipeline_action_color('F'));
}

TEST(SvgTimeline, RefusesWhatDoesNotFit) {
  Timeline t = two_lanes();
  t.boxes.push_back({2, 0, 1, "x", "#000", ""});
  EXPECT_THROW(svg_timeline(t), InvalidArgument);
  t = two_lanes();
  t.boxes.push_back({0, 3, 2, "x", "#000", ""});
  EXPECT_THROW(svg_timeline(t), InvalidArgument);
  t = two_lanes();
  t.arrows.push_back({0, 1, -1, 2});
  EXPECT_THROW(svg_timeline(t), InvalidArgument);
}

}  // namespace
}  // namespace meshtrain
