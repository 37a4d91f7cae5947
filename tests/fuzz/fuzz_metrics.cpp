// Metrics files (`train --metrics`, one JSON object per step) as `meshtrain report` reads them,
// then the report page drawn from what was accepted: charts of any finite or missing values.
#include "meshtrain/report/run_report.h"
#include "tests/fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = meshtrain::fuzz::as_file(data, size, "metrics.jsonl");
  return meshtrain::fuzz::accept_or_refuse([&] {
    meshtrain::run_report_html(meshtrain::read_metrics_file(path), meshtrain::RunInfo{});
  });
}
