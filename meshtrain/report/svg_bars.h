// A stacked horizontal bar chart as a standalone <svg> element: one bar per row, split into
// coloured segments (one per category, in the legend's order), a value axis from 0 with rounded
// ticks, each bar's total at its end, and an optional vertical line for a limit. `meshtrain plan
// --svg` draws memory per rank by category with it, the line marking the device's capacity.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace meshtrain {

struct StackedBar {
  std::string label{};           // left of the bar, cut with "…" when long ("#1 pp=2,dp=2")
  std::vector<double> values{};  // one per segment of the chart, in its order; finite, >= 0
  std::string tooltip{};         // optional: shown on hover over the label, under the full label
  // The bar's own total, when its segments only bound it (memory categories, each at its own
  // peak): written at the bar's end and held against the limit. Unset: the segments' sum.
  std::optional<double> total{};
};

struct StackedBarChart {
  std::string title{};
  std::string unit{};                   // of the values: the axis label and the tooltips' suffix
  std::vector<std::string> segments{};  // the categories, in stacking order (left to right)
  std::vector<StackedBar> bars{};       // top to bottom
  std::optional<double> limit{};        // a vertical line across the bars (a device's capacity)
  std::string limit_label{};            // written beside the line, e.g. "80 GiB per device"
  int width = 900;                      // the height follows the number of bars and legend rows
};

// The chart as an <svg> element (valid XML, no script, no external reference). Each non-zero
// value is a <rect class="segment"> with a tooltip such as "activations: 12.3 GiB"; every text is
// escaped. InvalidArgument for a bar whose value count differs from the segments', a negative or
// non-finite value or limit, or a width under 320.
std::string svg_stacked_bars(const StackedBarChart& chart);

}  // namespace meshtrain
