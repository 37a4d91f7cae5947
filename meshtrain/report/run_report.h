// A run's report: DIR/index.html, one self-contained page (inline CSS and SVG only: no script,
// font or stylesheet from elsewhere, readable offline) with charts of the metrics file that
// `meshtrain train --metrics` writes (meshtrain/train/reporter.cpp: one JSON object per step) —
// training and validation loss, tokens/s, step time with its exposed communication, peak memory
// per rank — a table of the final figures, and what the caller knows of the run (its
// configuration, the final sample). Written by `meshtrain train --report DIR` at the end of a run
// and by `meshtrain report METRICS -o DIR` after it (docs/report.md).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace meshtrain {

// The metrics file's lines as columns, one entry per line; NaN where a line has no value (JSON
// null: a loss that was not finite) or lacks an optional field.
struct RunMetrics {
  std::string path;
  std::vector<double> step, loss, val_loss, lr, step_time_s, tokens_per_s, exposed_comm_s, bubble_s,
      grad_norm, comm_bytes, peak_mem_bytes;
  std::vector<std::vector<double>> peak_mem_per_rank;  // [line][rank]
  bool has_val_loss = false, has_grad_norm = false, has_bubble = false;
  size_t size() const { return step.size(); }
};

// Reads a metrics file, skipping nothing silently: a line that is not a JSON object, lacks "step"
// or "loss", holds a field of the wrong type, or numbers its step no later than the line before
// is an InvalidArgument naming the file and the line number; a file that cannot be read is an
// IoError naming it. Blank lines are refused too; an empty file gives no steps.
RunMetrics read_metrics_file(const std::string& path);

// What the metrics do not say.
struct RunInfo {
  std::string title = "meshtrain run";
  std::vector<std::pair<std::string, std::string>> settings{};  // "model" -> "gpt2 demo (...)", ...
  std::string config_text{};  // the run as a --config file (--print-config), if known
  std::string sample{};       // the text sampled at the end, if any
};

// The page.
std::string run_report_html(const RunMetrics& metrics, const RunInfo& info);

// Reads `metrics_path` and writes `dir`/index.html (creating `dir`) atomically: it appears whole
// or not at all. Returns the page's path.
std::string write_run_report(const std::string& metrics_path, const std::string& dir,
                             const RunInfo& info);

}  // namespace meshtrain
