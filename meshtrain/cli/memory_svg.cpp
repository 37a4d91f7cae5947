#include "meshtrain/cli/memory_svg.h"

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <utility>

#include "meshtrain/core/error.h"
#include "meshtrain/report/svg_bars.h"

namespace meshtrain {

namespace {

const std::vector<std::string> kCategories = {
    "parameters",     "gradients",   "optimizer state",      "full parameters",
    "full gradients", "activations", "communication buffers"};

// A rank's memory as the tables show it: what it holds between steps, then the step's peaks.
std::vector<double> category_gib(const MemoryStats& m) {
  return {m[MemoryCategory::param].current / kGiB,
          m[MemoryCategory::grad].current / kGiB,
          m[MemoryCategory::optimizer].current / kGiB,
          m[MemoryCategory::unsharded_param].peak / kGiB,
          m[MemoryCategory::unsharded_grad].peak / kGiB,
          m[MemoryCategory::activation].peak / kGiB,
          m[MemoryCategory::comm].peak / kGiB};
}

std::string peak_tooltip(uint64_t peak) {
  char text[64];
  std::snprintf(text, sizeof text, "peak %.2f GiB", static_cast<double>(peak) / kGiB);
  return text;
}

StackedBarChart memory_chart(std::string title, double device_memory) {
  char capacity[48];
  std::snprintf(capacity, sizeof capacity, "%.1f GiB per device", device_memory / kGiB);
  return {.title = std::move(title),
          .unit = "GiB",
          .segments = kCategories,
          .limit = device_memory / kGiB,
          .limit_label = capacity};
}

}  // namespace

std::string search_memory_svg(const SearchReport& report) {
  StackedBarChart chart = memory_chart(
      "the fastest layouts that fit: memory of each one's largest rank (GiB, each category at "
      "its own peak)",
      report.machine.device_memory);
  const auto& fitting = report.search.fitting;
  for (size_t i = 0; i < std::min(fitting.size(), static_cast<size_t>(report.top)); ++i) {
    const PlannedLayout& p = fitting[i];
    chart.bars.push_back(
        {.label =
             detail::concat("#", i + 1, " ", p.layout.to_string(), " m=", p.workload.micro_batches),
         .values = category_gib(p.peak_memory),
         .tooltip = detail::concat("rank ", p.peak_rank, ": ", peak_tooltip(p.peak_bytes)),
         .total = static_cast<double>(p.peak_bytes) / kGiB});
  }
  return svg_stacked_bars(chart);
}

std::string layout_memory_svg(const std::string& title, const std::vector<MemoryStats>& ranks,
                              double device_memory) {
  // One bar per distinct memory, in the order of its first rank, labelled by its runs of ranks
  // ("ranks 0-503, 1024-1527, ... (2048 ranks)"): thousands of ranks make a few bars.
  struct Bar {
    std::vector<double> values;
    uint64_t peak = 0;
    std::vector<std::pair<size_t, size_t>> runs;  // first and last rank of each
  };
  std::vector<Bar> bars;
  for (size_t r = 0; r < ranks.size(); ++r) {
    std::vector<double> values = category_gib(ranks[r]);
    const auto same = [&](const Bar& b) {
      return b.values == values && b.peak == ranks[r].total.peak;
    };
    auto it = std::find_if(bars.begin(), bars.end(), same);
    if (it == bars.end()) {
      bars.push_back({.values = std::move(values), .peak = ranks[r].total.peak, .runs = {}});
      it = std::prev(bars.end());
    }
    if (!it->runs.empty() && it->runs.back().second + 1 == r)
      it->runs.back().second = r;
    else
      it->runs.emplace_back(r, r);
  }
  StackedBarChart chart = memory_chart(title, device_memory);
  for (const Bar& b : bars) {
    std::string label =
        b.runs.size() == 1 && b.runs[0].first == b.runs[0].second ? "rank " : "ranks ";
    size_t count = 0;
    for (size_t i = 0; i < b.runs.size(); ++i) {
      const auto [first, last] = b.runs[i];
      count += last - first + 1;
      if (i < 2)
        label += last > first ? detail::concat(i > 0 ? ", " : "", first, "-", last)
                              : detail::concat(i > 0 ? ", " : "", first);
    }
    if (b.runs.size() > 2) label += detail::concat(", ... (", count, " ranks)");
    chart.bars.push_back({.label = label,
                          .values = b.values,
                          .tooltip = peak_tooltip(b.peak),
                          .total = static_cast<double>(b.peak) / kGiB});
  }
  return svg_stacked_bars(chart);
}

}  // namespace meshtrain
