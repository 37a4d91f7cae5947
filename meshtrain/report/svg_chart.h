// A line chart of one or more series as a standalone <svg> element: axes with rounded ticks,
// labels, a legend, one polyline per unbroken run of finite points. Every text is escaped for
// XML; coordinates are written with two decimals. Small on purpose: the run report
// (run_report.h) draws all of its charts with it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace meshtrain {

struct ChartSeries {
  std::string name{};
  std::vector<double> x{}, y{};  // same length; a non-finite y (a missing value) breaks the line
  bool dashed = false;
};

struct ChartOptions {
  std::string title{}, x_label{}, y_label{};
  int width = 640, height = 300;
  bool y_from_zero = false;  // the y axis starts at 0 (throughput, memory, time)
};

// Where values land: the data range, widened to round ticks, mapped onto the plot area (SVG
// pixels, y growing downwards).
struct ChartScale {
  double x_min = 0, x_max = 1, y_min = 0, y_max = 1;
  double left = 0, right = 1, top = 0, bottom = 1;
  std::vector<double> x_ticks, y_ticks;
  double px(double x) const { return left + (x - x_min) / (x_max - x_min) * (right - left); }
  double py(double y) const { return bottom - (y - y_min) / (y_max - y_min) * (bottom - top); }
};

// The scale `svg_line_chart` draws with; InvalidArgument when a series' x and y differ in length.
ChartScale chart_scale(const std::vector<ChartSeries>& series, const ChartOptions& options);

// The chart as an <svg> element (valid XML, no script, no external reference).
std::string svg_line_chart(const std::vector<ChartSeries>& series, const ChartOptions& options);

// About `count` round values (1, 2 or 5 times a power of ten apart) covering [lo, hi]: the first
// is <= lo and the last >= hi.
std::vector<double> nice_ticks(double lo, double hi, int count);

// A tick's label: "0.5", "1200", "2.5e+07".
std::string format_tick(double value);

// `text` with & < > " ' as entities, and control characters other than tab and newline dropped:
// safe in XML text and in quoted attributes.
std::string xml_escape(std::string_view text);

// The SVG colour of series `index` (a fixed palette, cycled).
std::string_view series_color(size_t index);

}  // namespace meshtrain
