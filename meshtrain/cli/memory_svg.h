// `meshtrain plan --svg FILE`: memory per rank by category as stacked bars
// (meshtrain/report/svg_bars.h), the device's capacity marked by a line. Each category at its own
// peak, as the plan's tables show them: their sum bounds the rank's peak, which is written at the
// bar's end and held against the capacity.
#pragma once

#include <string>
#include <vector>

#include "meshtrain/cli/layout_search_output.h"
#include "meshtrain/core/memory.h"

namespace meshtrain {

// One bar per layout of the search's fastest that fit (SearchReport::top), its largest rank's.
std::string search_memory_svg(const SearchReport& report);

// One bar per distinct memory among the ranks of one layout, labelled by its runs of ranks
// ("ranks 0-503, 1024-1527, ... (2048 ranks)").
std::string layout_memory_svg(const std::string& title, const std::vector<MemoryStats>& ranks,
                              double device_memory);

}  // namespace meshtrain
