// The report opens in a headless browser and shows its charts: a screenshot of it is not blank
// (much larger than the screenshot of an empty page of the same size, PNG compressing a blank
// page to almost nothing). Runs where Chromium is installed; skipped elsewhere.
#include <cstdlib>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "meshtrain/report/run_report.h"
#include "tests/report/report_test_support.h"
#include "tests/support/scratch_dir.h"

namespace meshtrain {
namespace {

std::string find_chromium() {
  for (const char* name : {"chromium", "chromium-browser", "google-chrome"}) {
    const std::string probe = std::string("command -v ") + name + " >/dev/null 2>&1";
    if (std::system(probe.c_str()) == 0) return name;
  }
  return "";
}

// A PNG of `page` at 1280x1800; its size in bytes (0 when none was written).
uintmax_t screenshot(const std::string& browser, const std::string& page, const std::string& png) {
  const std::string command = browser +
                              " --headless --disable-gpu --no-sandbox "
                              "--hide-scrollbars --window-size=1280,1800 --screenshot='" +
                              png + "' 'file://" + page + "' >/dev/null 2>&1";
  std::system(command.c_str());
  return std::filesystem::exists(png) ? std::filesystem::file_size(png) : 0;
}

TEST(ReportInBrowser, ScreenshotShowsTheCharts) {
  const std::string browser = find_chromium();
  if (browser.empty()) GTEST_SKIP() << "no Chromium installed";
  testing::ScratchDir dir;
  const std::string metrics = dir.file("metrics.jsonl");
  testing::write_metrics(metrics, 40, 4, 10);
  const std::string page = write_run_report(metrics, dir.file("report"), {.title = "browser"});
  const std::string blank = dir.file("blank.html");
  testing::write_file(blank, "<!DOCTYPE html><html><body></body></html>");
  const uintmax_t report_png = screenshot(browser, page, dir.file("report.png"));
  const uintmax_t blank_png = screenshot(browser, blank, dir.file("blank.png"));
  ASSERT_GT(report_png, 0u) << browser << " wrote no screenshot";
  ASSERT_GT(blank_png, 0u);
  EXPECT_GT(report_png, 4 * blank_png) << "the report's screenshot is about as small as a blank "
                                          "page's: "
                                       << report_png << " vs " << blank_png;
}

}  // namespace
}  // namespace meshtrain
