// The run report: metrics files are read strictly (a bad line is named), and index.html is one
// self-contained page whose charts parse and hold the metrics' values.
#include "meshtrain/report/run_report.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "meshtrain/core/error.h"
#include "tests/report/mini_xml.h"
#include "tests/report/report_test_support.h"
#include "tests/support/scratch_dir.h"

namespace meshtrain {
namespace {

using ::testing::HasSubstr;
using testing::MiniXml;
using ::testing::Not;
using testing::ScratchDir;
using testing::XmlNode;

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The error `fn` throws, as text.
template <typename Fn>
std::string error_of(Fn fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(RunReport, ReadsTheLinesTheTrainerWrites) {
  ScratchDir dir;
  const std::string path = dir.file("metrics.jsonl");
  testing::write_metrics(path, 5, /*ranks=*/3);
  const RunMetrics m = read_metrics_file(path);
  ASSERT_EQ(m.size(), 5u);
  EXPECT_EQ(m.step.front(), 1);
  EXPECT_EQ(m.step.back(), 5);
  EXPECT_DOUBLE_EQ(m.loss[2], testing::loss_at(3));
  EXPECT_DOUBLE_EQ(m.tokens_per_s[1], 1000.0 + 20.0);
  EXPECT_EQ(m.peak_mem_per_rank[4].size(), 3u);
  EXPECT_DOUBLE_EQ(m.peak_mem_per_rank[4][2], (2.0 + 5) * (1 << 20));
  EXPECT_FALSE(m.has_val_loss);
  EXPECT_TRUE(std::isnan(m.val_loss[0]));
}

TEST(RunReport, ABadLineIsRefusedNamingFileAndLine) {
  ScratchDir dir;
  const std::string path = dir.file("metrics.jsonl");
  const std::string good = R"({"step":1,"loss":5.5})", next = R"({"step":2,"loss":5.0})";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"not json", "expected a JSON object"},
      {"[1,2]", "expected a JSON object"},
      {"", "expected a JSON object"},
      {R"({"loss":5})", "\"step\" must be a positive integer, got none"},
      {R"({"step":"3","loss":5})", "\"step\" must be a positive integer, got \"3\""},
      {R"({"step":3})", "no \"loss\""},
      {R"({"step":3,"loss":"low"})", "\"loss\" must be a number, got \"low\""},
      {R"({"step":3,"loss":1,"peak_mem_bytes_per_rank":5})",
       "\"peak_mem_bytes_per_rank\" must be an array of numbers"},
      {R"({"step":2,"loss":1})", "step 2 follows step 2 (steps must increase)"},
  };
  for (const auto& [bad, message] : cases) {
    testing::write_file(path, good + "\n" + next + "\n" + bad + "\n" + next + "\n");
    const std::string error = error_of([&] { read_metrics_file(path); });
    EXPECT_THAT(error, HasSubstr("the metrics file '" + path + "' line 3: ")) << bad;
    EXPECT_THAT(error, HasSubstr(message)) << bad;
  }
  // Null (a loss that was not finite) is a missing value, not an error.
  testing::write_file(path, good + "\n" + R"({"step":2,"loss":null})" + "\n");
  EXPECT_TRUE(std::isnan(read_metrics_file(path).loss[1]));
}

TEST(RunReport, AMissingFileIsNamed) {
  ScratchDir dir;
  const std::string path = dir.file("nope.jsonl");
  EXPECT_THAT(error_of([&] { read_metrics_file(path); }),
              HasSubstr("cannot open the metrics file '" + path + "'"));
  EXPECT_FALSE(std::filesystem::exists(dir.file("out")));
  EXPECT_THAT(error_of([&] { write_run_report(path, dir.file("out"), {}); }), HasSubstr(path));
  EXPECT_FALSE(std::filesystem::exists(dir.file("out")));
}

TEST(RunReport, WritesOneSelfContainedPageWithTheCharts) {
  ScratchDir dir;
  const std::string metrics = dir.file("metrics.jsonl"), out = dir.file("report/sub");
  testing::write_metrics(metrics, 12, /*ranks=*/4, /*val_every=*/4);
  RunInfo info;
  info.title = "demo <run>";
  info.settings = {{"mesh", "dp_shard=2,tp=2"}};
  info.config_text = "[training]\nsteps = 12\n";
  info.sample = std::string("The \xff end & <fin>");
  const std::string page = write_run_report(metrics, out, info);
  EXPECT_EQ(page, out + "/index.html");
  EXPECT_FALSE(std::filesystem::exists(page + ".partial"));
  const std::string html = read(page);
  // Nothing from elsewhere: no script, no link, no URL but the SVG namespace.
  for (const char* banned : {"<script", "<link", "src=", "href=", "@import", "url("})
    EXPECT_THAT(html, Not(HasSubstr(banned))) << banned;
  EXPECT_EQ(
      std::regex_replace(html, std::regex("xmlns=\"http://www.w3.org/2000/svg\""), "").find("http"),
      std::string::npos);
  EXPECT_THAT(html, HasSubstr("<title>demo &lt;run&gt;</title>"));
  EXPECT_THAT(html, HasSubstr("dp_shard=2,tp=2"));
  EXPECT_THAT(html, HasSubstr("steps = 12"));
  EXPECT_THAT(html, HasSubstr("The \xEF\xBF\xBD end &amp; &lt;fin&gt;"));  // valid UTF-8
  // Four charts, each well-formed XML.
  std::vector<XmlNode> charts;
  for (size_t at = html.find("<svg"); at != std::string::npos; at = html.find("<svg", at + 1))
    charts.push_back(MiniXml::parse(html.substr(at, html.find("</svg>", at) + 6 - at)));
  ASSERT_EQ(charts.size(), 4u);
  const auto lines = [](const XmlNode& svg, const std::string& name) {
    std::vector<const XmlNode*> all;
    svg.find_all("polyline", all);
    std::vector<std::string> points;
    for (const XmlNode* line : all)
      if (line->attributes.count("data-series") && line->attributes.at("data-series") == name)
        points.push_back(line->attributes.at("points"));
    return points;
  };
  const auto count = [](const std::string& points) {
    std::istringstream in(points);
    size_t n = 0;
    for (std::string p; in >> p;) ++n;
    return n;
  };
  ASSERT_EQ(lines(charts[0], "training loss").size(), 1u);
  EXPECT_EQ(count(lines(charts[0], "training loss")[0]), 12u);
  ASSERT_EQ(lines(charts[0], "validation loss").size(), 1u);
  EXPECT_EQ(count(lines(charts[0], "validation loss")[0]), 3u);  // steps 4, 8, 12
  EXPECT_EQ(lines(charts[1], "tokens/s").size(), 1u);
  EXPECT_EQ(lines(charts[2], "step time").size(), 1u);
  EXPECT_EQ(lines(charts[2], "exposed communication").size(), 1u);
  for (int r = 0; r < 4; ++r)
    EXPECT_EQ(lines(charts[3], "rank " + std::to_string(r)).size(), 1u) << "rank " << r;
  EXPECT_TRUE(lines(charts[2], "of which pipeline bubble").empty());  // no pipeline here
  EXPECT_THAT(html, Not(HasSubstr("pipeline bubble")));
}

// A pipelined run's step-time chart splits out the bubble, and the table gives its mean.
TEST(RunReport, APipelinedRunShowsItsBubble) {
  ScratchDir dir;
  const std::string metrics = dir.file("metrics.jsonl");
  testing::write_metrics(metrics, 6, /*ranks=*/2, /*val_every=*/0, /*pipelined=*/true);
  const RunMetrics m = read_metrics_file(metrics);
  ASSERT_TRUE(m.has_bubble);
  EXPECT_DOUBLE_EQ(m.bubble_s[3], testing::bubble_at(4));
  const std::string html = read(write_run_report(metrics, dir.file("report"), RunInfo{}));
  const size_t chart = html.find("Step time");
  ASSERT_NE(chart, std::string::npos);
  const XmlNode svg = MiniXml::parse(html.substr(
      html.rfind("<svg", chart), html.find("</svg>", chart) + 6 - html.rfind("<svg", chart)));
  std::vector<const XmlNode*> all;
  svg.find_all("polyline", all);
  EXPECT_EQ(std::count_if(all.begin(), all.end(),
                          [](const XmlNode* line) {
                            return line->attributes.count("data-series") &&
                                   line->attributes.at("data-series") == "of which pipeline bubble";
                          }),
            1);
  // Steps 2 to 6 (the first warms up): 2.0 + 0.1 x 4 ms on average.
  EXPECT_THAT(html, HasSubstr("of which pipeline bubble (mean)"));
  EXPECT_THAT(html, HasSubstr("2.4 ms per step"));
}

TEST(RunReport, AnEmptyFileGivesAPageWithoutCharts) {
  ScratchDir dir;
  const std::string metrics = dir.file("metrics.jsonl");
  testing::write_file(metrics, "");
  const std::string html = read(write_run_report(metrics, dir.file("out"), {}));
  EXPECT_THAT(html, HasSubstr("No steps recorded."));
  EXPECT_THAT(html, Not(HasSubstr("<svg")));
}

TEST(RunReport, AReportFolderThatIsAFileIsRefused) {
  ScratchDir dir;
  const std::string metrics = dir.file("metrics.jsonl");
  testing::write_metrics(metrics, 2, 1);
  testing::write_file(dir.file("taken"), "x");
  EXPECT_THAT(error_of([&] { write_run_report(metrics, dir.file("taken"), {}); }),
              HasSubstr("exists and is not a folder"));
}

}  // namespace
}  // namespace meshtrain
