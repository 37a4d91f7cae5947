// svg_line_chart: well-formed XML whatever the names hold, and polylines whose points are the
// series' values mapped through the chart's scale.
#include "meshtrain/report/svg_chart.h"

#include <cmath>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "meshtrain/core/error.h"
#include "tests/report/mini_xml.h"

namespace meshtrain {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::MiniXml;
using ::testing::Not;
using testing::XmlNode;

std::vector<std::pair<double, double>> points_of(const XmlNode& polyline) {
  std::vector<std::pair<double, double>> out;
  std::istringstream in(polyline.attributes.at("points"));
  for (std::string pair; in >> pair;) {
    const size_t comma = pair.find(',');
    out.emplace_back(std::stod(pair.substr(0, comma)), std::stod(pair.substr(comma + 1)));
  }
  return out;
}

std::vector<const XmlNode*> series_lines(const XmlNode& svg, const std::string& name) {
  std::vector<const XmlNode*> all, named;
  svg.find_all("polyline", all);
  for (const XmlNode* line : all)
    if (line->attributes.count("data-series") && line->attributes.at("data-series") == name)
      named.push_back(line);
  return named;
}

// Coordinates are written with two decimals.
constexpr double kRounding = 0.005 + 1e-9;

TEST(SvgChart, IsWellFormedXmlWithEveryTextEscaped) {
  const std::string odd = "a<b & c>\"d\" 'e'\x01";
  const std::string svg =
      svg_line_chart({{odd, {1, 2, 3}, {3, 2, 1}}, {"second", {1, 2, 3}, {1, 2, 4}, true}},
                     {.title = "Loss <" + odd + ">", .x_label = odd, .y_label = "y & z"});
  const XmlNode root = MiniXml::parse(svg);
  EXPECT_EQ(root.name, "svg");
  EXPECT_EQ(root.attributes.at("xmlns"), "http://www.w3.org/2000/svg");
  std::vector<const XmlNode*> titles;
  root.find_all("title", titles);
  ASSERT_FALSE(titles.empty());
  EXPECT_EQ(titles[0]->text, "Loss <a<b & c>\"d\" 'e'>");  // the control character dropped
  EXPECT_EQ(series_lines(root, "a<b & c>\"d\" 'e'").size(), 1u);
  EXPECT_THAT(svg, Not(HasSubstr("<script")));
}

TEST(SvgChart, PolylinePointsAreTheValuesThroughTheScale) {
  ChartSeries loss{"loss", {}, {}};
  for (int step = 1; step <= 50; ++step) {
    loss.x.push_back(step);
    loss.y.push_back(5.0 - std::log(step) + 0.3 * std::sin(step));
  }
  loss.y[17] = 9.25;   // the highest
  loss.y[30] = 0.125;  // the lowest
  const ChartOptions options{.title = "Loss", .x_label = "step", .y_label = "loss"};
  const ChartScale scale = chart_scale({loss}, options);
  const XmlNode svg = MiniXml::parse(svg_line_chart({loss}, options));
  const auto lines = series_lines(svg, "loss");
  ASSERT_EQ(lines.size(), 1u);
  const auto points = points_of(*lines[0]);
  ASSERT_EQ(points.size(), 50u);
  for (const size_t i : {size_t{0}, size_t{17}, size_t{30}, size_t{49}}) {
    EXPECT_NEAR(points[i].first, scale.px(loss.x[i]), kRounding) << "point " << i;
    EXPECT_NEAR(points[i].second, scale.py(loss.y[i]), kRounding) << "point " << i;
  }
  // The x range is the steps'; the y range rounds the values' outwards to ticks.
  EXPECT_NEAR(points.front().first, scale.left, kRounding);
  EXPECT_NEAR(points.back().first, scale.right, kRounding);
  EXPECT_LE(scale.y_min, 0.125);
  EXPECT_GE(scale.y_max, 9.25);
  EXPECT_GE(points[30].second, points[17].second);  // SVG's y grows downwards
  EXPECT_LE(points[17].second, scale.bottom);
  EXPECT_GE(points[17].second, scale.top);
  EXPECT_DOUBLE_EQ(scale.px(1), scale.left);
  EXPECT_DOUBLE_EQ(scale.py(scale.y_min), scale.bottom);
  EXPECT_DOUBLE_EQ(scale.py(scale.y_max), scale.top);
}

TEST(SvgChart, AMissingValueBreaksTheLineAndALonePointIsADot) {
  const double nan = std::nan("");
  const std::string text =
      svg_line_chart({{"loss", {1, 2, 3, 4, 5, 6}, {4, 3, nan, 2, nan, 1}}}, {.title = "Loss"});
  const XmlNode svg = MiniXml::parse(text);
  const auto lines = series_lines(svg, "loss");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(points_of(*lines[0]).size(), 2u);
  std::vector<const XmlNode*> dots;
  svg.find_all("circle", dots);
  EXPECT_EQ(dots.size(), 2u);  // steps 4 and 6
}

TEST(SvgChart, OneValueAndNoValuesStillDrawAxes) {
  MiniXml::parse(svg_line_chart({{"loss", {7}, {2.5}}}, {.title = "one"}));
  MiniXml::parse(svg_line_chart({{"loss", {}, {}}}, {.title = "none", .y_from_zero = true}));
  const ChartScale flat = chart_scale({{"t", {1, 2, 3}, {0, 0, 0}}}, {.y_from_zero = true});
  EXPECT_LT(flat.y_min, flat.y_max);
}

TEST(SvgChart, RefusesSeriesOfUnequalLengths) {
  try {
    svg_line_chart({{"loss", {1, 2}, {1}}}, {.title = "Loss"});
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("series 'loss' has 2 x values and 1 y values"));
  }
}

TEST(SvgChart, TicksAreRoundAndCoverTheRange) {
  EXPECT_THAT(nice_ticks(0, 10, 5), ElementsAre(0, 2, 4, 6, 8, 10));
  const std::vector<double> ticks = nice_ticks(0.13, 0.97, 5);
  EXPECT_LE(ticks.front(), 0.13);
  EXPECT_GE(ticks.back(), 0.97);
  for (const double t : ticks) EXPECT_EQ(format_tick(t).size() <= 3, true) << format_tick(t);
  const std::vector<double> one = nice_ticks(3, 3, 5);
  EXPECT_LE(one.front(), 3);
  EXPECT_GE(one.back(), 3);
  EXPECT_GT(one.size(), 1u);
  EXPECT_EQ(format_tick(12000), "12000");
  EXPECT_EQ(format_tick(0.5), "0.5");
}

TEST(SvgChart, EscapesTextForXml) {
  EXPECT_EQ(xml_escape("<a href='x'>&\"</a>"), "&lt;a href=&apos;x&apos;&gt;&amp;&quot;&lt;/a&gt;");
  EXPECT_EQ(xml_escape(std::string("a\x00\x1b[Kb\tc\n", 9)), "a[Kb\tc\n");
}

}  // namespace
}  // namespace meshtrain
