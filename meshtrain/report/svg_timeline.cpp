#include "meshtrain/report/svg_timeline.h"

#include <algorithm>
#include <cstdio>

#include "meshtrain/core/error.h"
#include "meshtrain/report/svg_chart.h"

namespace meshtrain {

namespace {

constexpr double kLeft = 70, kTop = 40, kLaneHeight = 26, kLaneGap = 6, kRight = 20;
constexpr double kAxisHeight = 40, kLegendHeight = 24;
constexpr double kCharWidth = 6.5;  // of the 11px labels, to decide whether one fits its box
constexpr double kMostPixelsPerUnit = 60, kLeastPlotWidth = 400, kMostPlotWidth = 1400;

std::string px(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", value);
  return text;
}

double lane_top(int lane) { return kTop + lane * (kLaneHeight + kLaneGap); }
double lane_middle(int lane) { return lane_top(lane) + kLaneHeight / 2; }

double legend_entry_width(const TimelineLegendEntry& entry) {  // its swatch, text and gap
  return 14 + kCharWidth * static_cast<double>(entry.text.size()) + 16;
}

}  // namespace

std::string svg_timeline(const Timeline& timeline) {
  const int lanes = static_cast<int>(timeline.lanes.size());
  const auto check_lane = [&](int lane, const char* what) {
    MT_CHECK(lane >= 0 && lane < lanes, "svg_timeline: ", what, " on lane ", lane, " of ", lanes);
  };
  double end = 0;
  for (const TimelineBox& b : timeline.boxes) {
    check_lane(b.lane, "a box");
    MT_CHECK(b.start <= b.end, "svg_timeline: box '", b.label, "' ends (", b.end,
             ") before it starts (", b.start, ")");
    end = std::max(end, b.end);
  }
  for (const TimelineArrow& a : timeline.arrows) {
    check_lane(a.from_lane, "an arrow");
    check_lane(a.to_lane, "an arrow");
    end = std::max({end, a.from_time, a.to_time});
  }
  if (end <= 0) end = 1;

  const double plot_width = std::clamp(end * kMostPixelsPerUnit, kLeastPlotWidth, kMostPlotWidth);
  const double scale = plot_width / end;
  const double x0 = kLeft;
  const auto x = [&](double t) { return x0 + t * scale; };
  const double lanes_bottom = lane_top(lanes) - kLaneGap;
  double legend_width = 0;
  for (const TimelineLegendEntry& e : timeline.legend) legend_width += legend_entry_width(e);
  const double width = kLeft + std::max(plot_width, legend_width) + kRight;  // the legend fits too
  const double height = lanes_bottom + kAxisHeight + kLegendHeight;

  std::string out = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + px(width) +
                    "\" height=\"" + px(height) +
                    "\" font-family=\"sans-serif\" font-size=\"11\">\n";
  out +=
      "<defs><marker id=\"arrow\" viewBox=\"0 0 6 6\" refX=\"6\" refY=\"3\" markerWidth=\"6\" "
      "markerHeight=\"6\" orient=\"auto\"><path d=\"M0,0 L6,3 L0,6 z\" fill=\"#555\"/>"
      "</marker></defs>\n";
  out += "<text x=\"" + px(kLeft) + "\" y=\"20\" font-size=\"14\">" + xml_escape(timeline.title) +
         "</text>\n";
  // Each lane is grey where nothing runs on it: its idle time (the bubble) shows.
  for (int lane = 0; lane < lanes; ++lane) {
    out += "<text x=\"" + px(kLeft - 8) + "\" y=\"" + px(lane_middle(lane) + 4) +
           "\" text-anchor=\"end\">" + xml_escape(timeline.lanes[lane]) + "</text>\n";
    out += "<rect class=\"idle\" x=\"" + px(x0) + "\" y=\"" + px(lane_top(lane)) + "\" width=\"" +
           px(plot_width) + "\" height=\"" + px(kLaneHeight) + "\" fill=\"#e6e6e6\"/>\n";
  }
  for (const TimelineBox& b : timeline.boxes) {
    const double left = x(b.start), box_width = (b.end - b.start) * scale;
    out += "<rect class=\"box\" x=\"" + px(left) + "\" y=\"" + px(lane_top(b.lane)) +
           "\" width=\"" + px(box_width) + "\" height=\"" + px(kLaneHeight) + "\" fill=\"" +
           xml_escape(b.color) + "\" stroke=\"#fff\" stroke-width=\"1\"><title>" +
           xml_escape(b.tooltip) + "</title></rect>\n";
    if (box_width >= kCharWidth * static_cast<double>(b.label.size()) + 4)
      out += "<text x=\"" + px(left + box_width / 2) + "\" y=\"" + px(lane_middle(b.lane) + 4) +
             "\" text-anchor=\"middle\" fill=\"#fff\" pointer-events=\"none\">" +
             xml_escape(b.label) + "</text>\n";
  }
  for (const TimelineArrow& a : timeline.arrows)
    out += "<line class=\"transfer\" x1=\"" + px(x(a.from_time)) + "\" y1=\"" +
           px(lane_middle(a.from_lane)) + "\" x2=\"" + px(x(a.to_time)) + "\" y2=\"" +
           px(lane_middle(a.to_lane)) +
           "\" stroke=\"#555\" stroke-opacity=\"0.5\" marker-end=\"url(#arrow)\"/>\n";

  // The time axis under the lanes.
  const double axis_y = lanes_bottom + 8;
  out += "<line x1=\"" + px(x0) + "\" y1=\"" + px(axis_y) + "\" x2=\"" + px(x0 + plot_width) +
         "\" y2=\"" + px(axis_y) + "\" stroke=\"#333\"/>\n";
  for (const double t : nice_ticks(0, end, 8)) {
    if (t < 0 || t > end) continue;
    out += "<line x1=\"" + px(x(t)) + "\" y1=\"" + px(axis_y) + "\" x2=\"" + px(x(t)) + "\" y2=\"" +
           px(axis_y + 4) + "\" stroke=\"#333\"/><text x=\"" + px(x(t)) + "\" y=\"" +
           px(axis_y + 16) + "\" text-anchor=\"middle\">" + format_tick(t) + "</text>\n";
  }
  out += "<text x=\"" + px(x0 + plot_width) + "\" y=\"" + px(axis_y + 30) +
         "\" text-anchor=\"end\">" + xml_escape(timeline.time_unit) + "</text>\n";
  double legend_x = kLeft;
  const double legend_y = axis_y + 30;
  for (const TimelineLegendEntry& e : timeline.legend) {
    out += "<rect x=\"" + px(legend_x) + "\" y=\"" + px(legend_y - 9) +
           "\" width=\"10\" height=\"10\" fill=\"" + xml_escape(e.color) + "\"/><text x=\"" +
           px(legend_x + 14) + "\" y=\"" + px(legend_y) + "\">" + xml_escape(e.text) + "</text>\n";
    legend_x += legend_entry_width(e);
  }
  out += "</svg>\n";
  return out;
}

std::string pipeline_action_color(char kind) {
  switch (kind) {
    case 'F':
      return "#1f77b4";
    case 'B':
      return "#2ca02c";
    case 'I':
      return "#ff7f0e";
    case 'W':
      return "#9467bd";
    default:
      return "#7f7f7f";
  }
}

std::vector<TimelineLegendEntry> pipeline_legend() {
  std::vector<TimelineLegendEntry> legend;
  for (const auto& [kind, text] : {std::pair{'F', "F: forward"},
                                   {'B', "B: backward"},
                                   {'I', "I: input gradient"},
                                   {'W', "W: weight gradient"}})
    legend.push_back({text, pipeline_action_color(kind)});
  legend.push_back({"grey: idle", "#e6e6e6"});
  return legend;
}

}  // namespace meshtrain
