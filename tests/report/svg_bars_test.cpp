// svg_stacked_bars: well-formed XML whatever the labels hold, a rect per non-zero value whose
// width is the value through one scale, segments laid end to end, the limit line where its value
// falls on that scale, a legend entry per segment, and refusals of values that cannot be drawn.
#include "meshtrain/report/svg_bars.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "meshtrain/core/error.h"
#include "tests/report/mini_xml.h"

namespace meshtrain {
namespace {

using ::testing::HasSubstr;
using testing::MiniXml;
using ::testing::Not;
using testing::XmlNode;

// Coordinates are written with two decimals: a width, the difference of two, is within 0.01 of
// its value, and the scale read from the ticks adds a little.
constexpr double kTolerance = 0.02;

double number(const XmlNode& node, const std::string& attribute) {
  return std::stod(node.attributes.at(attribute));
}

std::string title_of(const XmlNode& node) {
  for (const XmlNode& child : node.children)
    if (child.name == "title") return child.text;
  return "";
}

StackedBarChart memory_chart() {
  StackedBarChart chart;
  chart.title = "Memory per rank";
  chart.unit = "GiB";
  chart.segments = {"parameters", "gradients", "optimizer state", "activations"};
  chart.bars = {{"#1 pp=2,dp_shard=2", {10, 20, 0, 30}, "rank 0"},
                {"#2 tp=2,dp=2", {5, 0, 15, 12.5}, ""}};
  chart.limit = 80;
  chart.limit_label = "80 GiB per device";
  return chart;
}

TEST(SvgBars, SegmentWidthsAreTheValuesThroughOneScale) {
  const StackedBarChart chart = memory_chart();
  const XmlNode svg = MiniXml::parse(svg_stacked_bars(chart));
  const auto bars = svg.find_with_class("g", "bar");
  ASSERT_EQ(bars.size(), 2u);
  const auto first = bars[0]->find_with_class("rect", "segment");
  const auto second = bars[1]->find_with_class("rect", "segment");
  ASSERT_EQ(first.size(), 3u);   // the zero optimizer state draws nothing
  ASSERT_EQ(second.size(), 3u);  // nor do the zero gradients
  EXPECT_EQ(first[2]->attributes.at("data-segment"), "activations");
  EXPECT_EQ(second[1]->attributes.at("data-segment"), "optimizer state");

  // Pixels per GiB, from the axis' ticks at 0 and 80 GiB; every segment must agree.
  const auto ticks = svg.find_with_class("text", "tick");
  ASSERT_GE(ticks.size(), 2u);
  EXPECT_EQ(ticks.front()->text, "0");
  EXPECT_EQ(ticks.back()->text, "80");  // the limit, past the largest bar (60)
  const double left = number(*ticks.front(), "x");
  const double scale = (number(*ticks.back(), "x") - left) / 80;
  EXPECT_GT(scale, 0);
  const std::vector<std::pair<std::vector<const XmlNode*>, std::vector<double>>> expected = {
      {first, {10, 20, 30}}, {second, {5, 15, 12.5}}};
  for (const auto& [rects, values] : expected) {
    double x = left;
    for (size_t k = 0; k < rects.size(); ++k) {
      EXPECT_NEAR(number(*rects[k], "x"), x, kTolerance) << "segment " << k;
      EXPECT_NEAR(number(*rects[k], "width"), values[k] * scale, kTolerance) << "segment " << k;
      x += values[k] * scale;
    }
  }
  EXPECT_NEAR(number(*first[1], "width"), 20 * scale, kTolerance);
  EXPECT_NEAR(number(*second[2], "width"), 12.5 * scale, kTolerance);
  // One row per bar, top to bottom.
  EXPECT_LT(number(*first[0], "y"), number(*second[0], "y"));
  EXPECT_EQ(title_of(*first[2]), "activations: 30 GiB");
  EXPECT_EQ(title_of(*second[2]), "activations: 12.5 GiB");

  // The limit line falls where 80 GiB does.
  const auto limit = svg.find_with_class("line", "limit");
  ASSERT_EQ(limit.size(), 1u);
  EXPECT_NEAR(number(*limit[0], "x1"), left + 80 * scale, kTolerance);
  EXPECT_EQ(number(*limit[0], "x1"), number(*limit[0], "x2"));
  const auto limit_label = svg.find_with_class("text", "limit-label");
  ASSERT_EQ(limit_label.size(), 1u);
  EXPECT_EQ(limit_label[0]->text, "80 GiB per device");
  // Each bar's total follows it.
  const auto totals = svg.find_with_class("text", "total");
  ASSERT_EQ(totals.size(), 2u);
  EXPECT_EQ(totals[0]->text, "60");
  EXPECT_EQ(totals[1]->text, "32.5");
}

TEST(SvgBars, TheAxisCoversTheLargestBarPastTheLimit) {
  StackedBarChart chart = memory_chart();
  chart.bars[0].values = {40, 40, 40, 3};  // 123 GiB, over the 80 GiB device
  const XmlNode svg = MiniXml::parse(svg_stacked_bars(chart));
  const auto ticks = svg.find_with_class("text", "tick");
  const double axis_max = std::stod(ticks.back()->text);
  EXPECT_GE(axis_max, 123);
  const double left = number(*ticks.front(), "x");
  const double scale = (number(*ticks.back(), "x") - left) / axis_max;
  EXPECT_NEAR(number(*svg.find_with_class("line", "limit")[0], "x1"), left + 80 * scale,
              kTolerance);
  const auto segments = svg.find_with_class("rect", "segment");
  EXPECT_NEAR(number(*segments[2], "x") + number(*segments[2], "width"), left + 120 * scale,
              kTolerance);
  const auto totals = svg.find_with_class("text", "total");
  EXPECT_EQ(totals[0]->attributes.at("font-weight"), "bold");  // over the limit
  EXPECT_EQ(totals[1]->attributes.count("font-weight"), 0u);
}

// Categories each at its own peak sum past the rank's peak: the bar's own total is written and
// held against the limit, the segments drawn as they are.
TEST(SvgBars, ABarsOwnTotalIsWrittenAndHeldAgainstTheLimit) {
  StackedBarChart chart = memory_chart();
  chart.bars[0].values = {10, 20, 25, 30};  // 85 GiB of categories
  chart.bars[0].total = 79.5;               // peaking at 79.5 GiB: it fits
  chart.bars[1].total = 90;                 // past what its segments reach
  const XmlNode svg = MiniXml::parse(svg_stacked_bars(chart));
  const auto totals = svg.find_with_class("text", "total");
  EXPECT_EQ(totals[0]->text, "79.5");
  EXPECT_EQ(totals[0]->attributes.count("font-weight"), 0u);
  EXPECT_EQ(totals[1]->text, "90");
  EXPECT_EQ(totals[1]->attributes.at("font-weight"), "bold");
  EXPECT_GE(std::stod(svg.find_with_class("text", "tick").back()->text), 90);
  chart.bars[0].total = -1;
  EXPECT_THROW(svg_stacked_bars(chart), InvalidArgument);
}

TEST(SvgBars, HasALegendEntryPerSegmentInOrder) {
  StackedBarChart chart = memory_chart();
  chart.segments = {"parameters",     "gradients",   "optimizer state",      "full parameters",
                    "full gradients", "activations", "communication buffers"};
  for (StackedBar& bar : chart.bars) bar.values = {1, 2, 3, 4, 5, 6, 7};
  const XmlNode svg = MiniXml::parse(svg_stacked_bars(chart));
  const auto swatches = svg.find_with_class("rect", "legend");
  ASSERT_EQ(swatches.size(), chart.segments.size());
  std::vector<const XmlNode*> texts;
  svg.find_all("text", texts);
  const auto segments = svg.find_with_class("rect", "segment");
  ASSERT_EQ(segments.size(), 14u);
  for (size_t k = 0; k < chart.segments.size(); ++k) {
    const auto named = std::find_if(texts.begin(), texts.end(),
                                    [&](const XmlNode* t) { return t->text == chart.segments[k]; });
    EXPECT_NE(named, texts.end()) << chart.segments[k];
    // The swatch's colour is its segments'.
    EXPECT_EQ(swatches[k]->attributes.at("fill"), segments[k]->attributes.at("fill"));
    EXPECT_LE(number(*swatches[k], "x") + 10, 900) << "a legend row wraps inside the width";
  }
}

TEST(SvgBars, EscapesLabelsAndShortensLongOnesKeepingThemInTheTooltip) {
  StackedBarChart chart = memory_chart();
  chart.title = "a <chart> & \"more\"";
  chart.unit = "G<i>B";
  chart.segments[0] = "params & <co>";
  chart.bars[0].label = "#1 <pp=2> & \"dp\"";
  chart.bars[1].label = std::string(300, 'x') + "\u00e9\u00e9";
  chart.bars[1].tooltip = "rank \"3\"";
  const std::string text = svg_stacked_bars(chart);
  const XmlNode svg = MiniXml::parse(text);
  EXPECT_THAT(text, Not(HasSubstr("<script")));
  EXPECT_THAT(text, Not(HasSubstr("href")));
  EXPECT_EQ(title_of(svg), "a <chart> & \"more\"");
  const auto labels = svg.find_with_class("text", "label");
  ASSERT_EQ(labels.size(), 2u);
  EXPECT_EQ(labels[0]->text, "#1 <pp=2> & \"dp\"");
  EXPECT_EQ(title_of(*labels[0]), "rank 0");
  EXPECT_EQ(svg.find_with_class("rect", "segment")[0]->attributes.at("data-segment"),
            "params & <co>");
  EXPECT_EQ(title_of(*svg.find_with_class("rect", "segment")[0]), "params & <co>: 10 G<i>B");

  // The long label ends in an ellipsis left of the bars; its full text is in its tooltip.
  const std::string shown = labels[1]->text;
  EXPECT_LT(shown.size(), 302u);
  EXPECT_EQ(shown.substr(shown.size() - 3), "\u2026");
  EXPECT_EQ(title_of(*labels[1]), chart.bars[1].label + "\nrank \"3\"");
  const double label_right = number(*labels[1], "x");                // text-anchor="end"
  const double label_chars = static_cast<double>(shown.size() - 2);  // the ellipsis is 3 bytes
  EXPECT_GE(label_right - 6.5 * label_chars, 0) << "the label starts inside the chart";
  for (const XmlNode* rect : svg.find_with_class("rect", "segment"))
    EXPECT_GT(number(*rect, "x"), label_right);
}

TEST(SvgBars, CutsAUtf8LabelBetweenCharacters) {
  StackedBarChart chart = memory_chart();
  chart.width = 320;  // room for 19 characters
  chart.bars[0].label = "\u00e9" + std::string(40, 'a');
  chart.bars[1].label.clear();
  for (int i = 0; i < 40; ++i) chart.bars[1].label += "\u00e9";
  const XmlNode svg = MiniXml::parse(svg_stacked_bars(chart));
  const auto labels = svg.find_with_class("text", "label");
  ASSERT_EQ(labels.size(), 2u);
  std::string expected;
  for (int i = 0; i < 18; ++i) expected += "\u00e9";
  EXPECT_EQ(labels[1]->text, expected + "\u2026");
  EXPECT_EQ(labels[0]->text, "\u00e9" + std::string(17, 'a') + "\u2026");
}

TEST(SvgBars, NoBarsGiveAnEmptyChartWithItsTitle) {
  StackedBarChart chart = memory_chart();
  chart.bars.clear();
  chart.limit.reset();
  const XmlNode svg = MiniXml::parse(svg_stacked_bars(chart));
  EXPECT_EQ(title_of(svg), "Memory per rank");
  EXPECT_TRUE(svg.find_with_class("g", "bar").empty());
  EXPECT_TRUE(svg.find_with_class("line", "limit").empty());
  EXPECT_GT(number(svg, "height"), 0);
  // Nothing at all: no segments either.
  MiniXml::parse(svg_stacked_bars({.title = "empty"}));
  // Bars of zeros draw no rects but still a total.
  chart.bars = {{"idle", {0, 0, 0, 0}, ""}};
  const XmlNode zeros = MiniXml::parse(svg_stacked_bars(chart));
  EXPECT_TRUE(zeros.find_with_class("rect", "segment").empty());
  EXPECT_EQ(zeros.find_with_class("text", "total")[0]->text, "0");
}

TEST(SvgBars, TheHeightFollowsTheBarCount) {
  StackedBarChart chart = memory_chart();
  const double two = number(MiniXml::parse(svg_stacked_bars(chart)), "height");
  chart.bars.insert(chart.bars.end(), 8, chart.bars[1]);
  const double ten = number(MiniXml::parse(svg_stacked_bars(chart)), "height");
  EXPECT_NEAR(ten - two, 8 * (18 + 8), kTolerance);  // a bar and the gap under it, each
}

void expect_refused(const StackedBarChart& chart, const std::string& message) {
  try {
    svg_stacked_bars(chart);
    ADD_FAILURE() << "no error; expected " << message;
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr(message));
  }
}

TEST(SvgBars, RefusesValuesItCannotDraw) {
  StackedBarChart chart = memory_chart();
  chart.bars[1].values.pop_back();
  expect_refused(chart, "bar '#2 tp=2,dp=2' has 3 values for 4 segments");
  chart = memory_chart();
  chart.bars[0].values[1] = -1;
  expect_refused(chart, "bar '#1 pp=2,dp_shard=2' has -1 for segment 'gradients'");
  chart = memory_chart();
  chart.bars[1].values[3] = std::nan("");
  expect_refused(chart, "for segment 'activations'; expected a finite value >= 0");
  chart = memory_chart();
  chart.bars[1].values[0] = INFINITY;
  expect_refused(chart, "for segment 'parameters'");
  chart = memory_chart();
  chart.limit = -80;
  expect_refused(chart, "has limit -80");
  chart = memory_chart();
  chart.width = 100;
  expect_refused(chart, "is 100 pixels wide; expected at least 320");
}

}  // namespace
}  // namespace meshtrain
