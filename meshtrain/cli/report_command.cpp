#include <iostream>
#include <memory>

#include "meshtrain/checkpoint/durable_files.h"
#include "meshtrain/cli/commands.h"
#include "meshtrain/report/run_report.h"

namespace meshtrain {

namespace {
struct ReportFlags {
  std::string metrics;
  std::string out;
  std::string title;
  std::string run_config;  // a file whose text the report shows as the run's configuration
};
}  // namespace

// `meshtrain report METRICS.jsonl -o DIR`: the report `train --report DIR` writes at the end of a
// run, drawn after the fact from its metrics file (docs/report.md).
void add_report_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "report",
      "Write a run's report (DIR/index.html: charts of loss, throughput, step time and "
      "memory per rank, and the final figures) from its metrics file");
  auto f = std::make_shared<ReportFlags>();
  // Not CLI::ExistingFile: the report's own error names the file and the reason.
  cmd->add_option("metrics", f->metrics, "metrics file (JSON lines) that train --metrics wrote")
      ->required();
  cmd->add_option("-o,--out", f->out, "folder of the report (created if missing)")
      ->required()
      ->check(kNonEmptyPath);
  cmd->add_option("--title", f->title, "the page's title (default: the metrics file's name)");
  cmd->add_option("--run-config", f->run_config,
                  "a file to show as the run's configuration (what train --print-config wrote)")
      ->check(CLI::ExistingFile);
  cmd->callback([f] {
    RunInfo info;
    info.title = f->title.empty() ? "meshtrain run: " + f->metrics : f->title;
    if (!f->run_config.empty()) info.config_text = read_small_file(f->run_config);
    const std::string page = write_run_report(f->metrics, f->out, info);
    std::cout << "wrote " << page << "\n";
  });
}

}  // namespace meshtrain
