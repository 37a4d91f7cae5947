// A timeline as a standalone <svg> element: one lane per row (a pipeline rank), a box for each
// thing that ran (coloured by kind, labelled where it fits, its times in a tooltip) over a grey
// lane that shows where the row was idle, arrows for transfers between lanes, a time axis and a
// legend. `meshtrain schedule --svg` draws pipeline schedules with it; it opens in a browser.
#pragma once

#include <string>
#include <vector>

namespace meshtrain {

struct TimelineBox {
  int lane = 0;
  double start = 0, end = 0;
  std::string label;    // written inside the box when it fits ("1F3")
  std::string color;    // an SVG colour
  std::string tooltip;  // shown on hover
};

// A transfer: posted on `from_lane` at `from_time`, taken on `to_lane` at `to_time`.
struct TimelineArrow {
  int from_lane = 0;
  double from_time = 0;
  int to_lane = 0;
  double to_time = 0;
};

struct TimelineLegendEntry {
  std::string text;
  std::string color;
};

struct Timeline {
  std::string title;
  std::string time_unit;           // the axis label, e.g. "time (forward = 1)"
  std::vector<std::string> lanes;  // top to bottom
  std::vector<TimelineBox> boxes;
  std::vector<TimelineArrow> arrows;
  std::vector<TimelineLegendEntry> legend;
};

// InvalidArgument for a box or arrow on a lane that does not exist, or a box that ends before it
// starts.
std::string svg_timeline(const Timeline& timeline);

// The drawings of pipeline schedules, simulated (`schedule --svg`) and traced (`schedule --trace`),
// share their colours: a computation's by its kind's letter (F, B, I or W; grey for another), and
// the legend that names them and the grey idle lane.
std::string pipeline_action_color(char kind);
std::vector<TimelineLegendEntry> pipeline_legend();

}  // namespace meshtrain
