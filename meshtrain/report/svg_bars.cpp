#include "meshtrain/report/svg_bars.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string_view>

#include "meshtrain/core/error.h"
#include "meshtrain/report/svg_chart.h"

namespace meshtrain {

namespace {

constexpr double kMargin = 10, kLabelGap = 8, kRightForTotals = 56;
constexpr double kLegendTop = 34, kLegendRow = 18, kLimitRow = 18;
constexpr double kBarHeight = 18, kBarGap = 8, kAxisHeight = 44;
constexpr double kCharWidth = 6.5;       // of the 11px text, to lay labels out without a font
constexpr double kMostLabelShare = 0.4;  // of the width, for the label column
constexpr int kLeastWidth = 320;

std::string px(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", value);
  return text;
}

// Three significant digits ("12.3", "0.0457"), whole numbers from 1000 on ("1536", not "1.54e+03").
std::string format_value(double value) {
  char text[32];
  std::snprintf(text, sizeof text, value >= 999.5 ? "%.0f" : "%.3g", value);
  return text;
}

// Characters, not bytes, so that a UTF-8 label is measured and cut where a character starts.
size_t char_count(std::string_view text) {
  return static_cast<size_t>(
      std::count_if(text.begin(), text.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

std::string shortened(const std::string& text, size_t most_chars) {
  if (char_count(text) <= most_chars) return text;
  size_t end = 0;
  for (size_t kept = 0; end < text.size(); ++end)
    if ((text[end] & 0xC0) != 0x80 && kept++ == most_chars - 1) break;
  return text.substr(0, end) + "\u2026";
}

// How far the bar reaches: its segments' sum, or its own total where that is more.
double bar_length(const StackedBar& bar) {
  double sum = 0;
  for (const double v : bar.values) sum += v;
  return std::max(sum, bar.total.value_or(0));
}

void check(const StackedBarChart& chart) {
  MT_CHECK(chart.width >= kLeastWidth, "svg_stacked_bars: chart '", chart.title, "' is ",
           chart.width, " pixels wide; expected at least ", kLeastWidth);
  MT_CHECK(!chart.limit || (std::isfinite(*chart.limit) && *chart.limit >= 0),
           "svg_stacked_bars: chart '", chart.title, "' has limit ", chart.limit.value_or(0),
           "; expected a finite value >= 0");
  for (const StackedBar& bar : chart.bars) {
    MT_CHECK(bar.values.size() == chart.segments.size(), "svg_stacked_bars: bar '", bar.label,
             "' has ", bar.values.size(), " values for ", chart.segments.size(), " segments");
    for (size_t k = 0; k < bar.values.size(); ++k)
      MT_CHECK(std::isfinite(bar.values[k]) && bar.values[k] >= 0, "svg_stacked_bars: bar '",
               bar.label, "' has ", bar.values[k], " for segment '", chart.segments[k],
               "'; expected a finite value >= 0");
    MT_CHECK(!bar.total || (std::isfinite(*bar.total) && *bar.total >= 0),
             "svg_stacked_bars: bar '", bar.label, "' has a total of ", bar.total.value_or(0),
             "; expected a finite value >= 0");
  }
}

}  // namespace

std::string svg_stacked_bars(const StackedBarChart& chart) {
  check(chart);
  const double width = chart.width;
  const std::string unit_suffix = chart.unit.empty() ? "" : " " + chart.unit;

  // The legend, wrapped into rows under the title.
  struct LegendEntry {
    double x, y;
  };
  std::vector<LegendEntry> legend;
  double legend_x = kMargin, legend_y = kLegendTop;
  for (const std::string& name : chart.segments) {
    const double entry_width = 14 + kCharWidth * static_cast<double>(char_count(name)) + 16;
    if (legend_x > kMargin && legend_x + entry_width > width - kMargin) {
      legend_x = kMargin;
      legend_y += kLegendRow;
    }
    legend.push_back({legend_x, legend_y});
    legend_x += entry_width;
  }
  const double legend_bottom = legend.empty() ? kLegendTop - 8 : legend_y + kLegendRow / 2;

  // A label column as wide as the longest label, up to a share of the width; longer labels are
  // cut, so that none runs into its bar.
  size_t longest_label = 0;
  for (const StackedBar& bar : chart.bars)
    longest_label = std::max(longest_label, char_count(bar.label));
  const size_t most_label_chars =
      std::max<size_t>(4, static_cast<size_t>(std::floor(width * kMostLabelShare / kCharWidth)));
  const double label_column =
      kCharWidth * static_cast<double>(std::min(longest_label, most_label_chars));
  const double plot_left = kMargin + label_column + kLabelGap;
  const double plot_right = width - kRightForTotals;

  // The value axis: from 0 to a round value at or past the largest total and the limit.
  double largest = chart.limit.value_or(0);
  for (const StackedBar& bar : chart.bars) largest = std::max(largest, bar_length(bar));
  const std::vector<double> ticks = nice_ticks(0, largest > 0 ? largest : 1, 6);
  const double axis_max = ticks.back();
  const auto x_of = [&](double value) {
    return plot_left + value / axis_max * (plot_right - plot_left);
  };

  const double bars_top = legend_bottom + (chart.limit ? kLimitRow : 0) + 8;
  const auto bar_top = [&](size_t i) {
    return bars_top + static_cast<double>(i) * (kBarHeight + kBarGap);
  };
  const double bars_bottom =
      chart.bars.empty() ? bars_top + kBarHeight : bar_top(chart.bars.size()) - kBarGap;
  const double axis_y = bars_bottom + 6;
  const double height = axis_y + kAxisHeight;

  const std::string w = px(width), h = px(height), title = xml_escape(chart.title);
  std::string out = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + w + "\" height=\"" + h +
                    "\" viewBox=\"0 0 " + w + " " + h + "\" role=\"img\" aria-label=\"" + title +
                    "\" font-family=\"sans-serif\" font-size=\"11\">\n";
  out += "<title>" + title + "</title>\n";
  out += "<rect x=\"0\" y=\"0\" width=\"" + w + "\" height=\"" + h + "\" fill=\"#ffffff\"/>\n";
  out += "<text x=\"" + px(kMargin) + "\" y=\"20\" font-size=\"13\" font-weight=\"bold\">" + title +
         "</text>\n";
  for (size_t k = 0; k < legend.size(); ++k)
    out += "<rect class=\"legend\" x=\"" + px(legend[k].x) + "\" y=\"" + px(legend[k].y - 5) +
           "\" width=\"10\" height=\"10\" fill=\"" + std::string(series_color(k)) +
           "\"/><text x=\"" + px(legend[k].x + 14) + "\" y=\"" + px(legend[k].y) +
           "\" dominant-baseline=\"middle\">" + xml_escape(chart.segments[k]) + "</text>\n";

  // Grid lines, ticks and the axis under the bars.
  for (const double t : ticks) {
    const std::string x = px(x_of(t));
    out += "<line x1=\"" + x + "\" y1=\"" + px(bars_top - 4) + "\" x2=\"" + x + "\" y2=\"" +
           px(axis_y) + "\" stroke=\"#e0e0e0\"/>\n";
    out += "<line x1=\"" + x + "\" y1=\"" + px(axis_y) + "\" x2=\"" + x + "\" y2=\"" +
           px(axis_y + 5) + "\" stroke=\"#333333\"/><text class=\"tick\" x=\"" + x + "\" y=\"" +
           px(axis_y + 17) + "\" text-anchor=\"middle\">" + xml_escape(format_tick(t)) +
           "</text>\n";
  }
  out += "<polyline class=\"axes\" fill=\"none\" stroke=\"#333333\" points=\"" + px(plot_left) +
         "," + px(bars_top - 4) + " " + px(plot_left) + "," + px(axis_y) + " " + px(plot_right) +
         "," + px(axis_y) + "\"/>\n";
  out += "<text x=\"" + px((plot_left + plot_right) / 2) + "\" y=\"" + px(axis_y + 34) +
         "\" text-anchor=\"middle\">" + xml_escape(chart.unit) + "</text>\n";

  for (size_t i = 0; i < chart.bars.size(); ++i) {
    const StackedBar& bar = chart.bars[i];
    const double top = bar_top(i), middle = top + kBarHeight / 2;
    out += "<g class=\"bar\">\n";
    // The label's tooltip holds what the label cannot: its full text, and the caller's tooltip.
    const std::string label = shortened(bar.label, most_label_chars);
    std::string hover = label == bar.label ? "" : bar.label;
    if (!bar.tooltip.empty()) hover += (hover.empty() ? "" : "\n") + bar.tooltip;
    out += "<text class=\"label\" x=\"" + px(plot_left - kLabelGap) + "\" y=\"" + px(middle) +
           "\" text-anchor=\"end\" dominant-baseline=\"middle\">" +
           (hover.empty() ? "" : "<title>" + xml_escape(hover) + "</title>") + xml_escape(label) +
           "</text>\n";
    double sum = 0;
    for (size_t k = 0; k < bar.values.size(); ++k) {
      if (bar.values[k] == 0) continue;
      const double left = x_of(sum);
      sum += bar.values[k];
      out += "<rect class=\"segment\" data-segment=\"" + xml_escape(chart.segments[k]) + "\" x=\"" +
             px(left) + "\" y=\"" + px(top) + "\" width=\"" + px(x_of(sum) - left) +
             "\" height=\"" + px(kBarHeight) + "\" fill=\"" + std::string(series_color(k)) +
             "\"><title>" +
             xml_escape(chart.segments[k] + ": " + format_value(bar.values[k]) + unit_suffix) +
             "</title></rect>\n";
    }
    const double total = bar.total.value_or(sum);
    const bool over_limit = chart.limit && total > *chart.limit;
    out += "<text class=\"total\" x=\"" + px(x_of(sum) + 4) + "\" y=\"" + px(middle) +
           "\" dominant-baseline=\"middle\"" +
           (over_limit ? " fill=\"#b00020\" font-weight=\"bold\"" : "") + ">" +
           xml_escape(format_value(total)) + "</text>\n";
    out += "</g>\n";
  }

  // The limit on top of the bars, labelled on the side with more room.
  if (chart.limit) {
    const double x = x_of(*chart.limit);
    const bool label_left = x > (plot_left + plot_right) / 2;
    out += "<line class=\"limit\" x1=\"" + px(x) + "\" y1=\"" + px(bars_top - kLimitRow) +
           "\" x2=\"" + px(x) + "\" y2=\"" + px(axis_y) +
           "\" stroke=\"#000000\" stroke-width=\"1.5\" stroke-dasharray=\"6 3\"/>\n";
    out += "<text class=\"limit-label\" x=\"" + px(label_left ? x - 4 : x + 4) + "\" y=\"" +
           px(bars_top - kLimitRow / 2 - 2) + "\" text-anchor=\"" + (label_left ? "end" : "start") +
           "\" dominant-baseline=\"middle\">" + xml_escape(chart.limit_label) + "</text>\n";
  }
  out += "</svg>\n";
  return out;
}

}  // namespace meshtrain
