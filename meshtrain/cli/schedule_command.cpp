#include <charconv>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "meshtrain/checkpoint/durable_files.h"
#include "meshtrain/cli/commands.h"
#include "meshtrain/core/error.h"
#include "meshtrain/plugins/builtin_tools.h"
#include "meshtrain/report/trace_timeline.h"

namespace meshtrain {

namespace {

constexpr int kMaxCount = 1024;  // ranks, micro-batches, stages per rank: far beyond real pipelines

struct ScheduleFlags {
  int pp = 0;
  int microbatches = 0;
  int virtual_stages = 0;  // 0: 2 for interleaved, 1 otherwise
  std::string kind;
  std::string file;
  std::string costs = "1,1,1";
  std::string svg;    // also draw the schedule into this file
  std::string trace;  // a traced run's folder, read instead of generating a schedule
  int64_t step = 0;   // the traced step; 0: the last
};

// "F,I,W" -> PipelineStageCosts, each a finite non-negative number.
PipelineStageCosts parse_costs(const std::string& text) {
  std::vector<double> values;
  bool ok = !text.empty() && text.back() != ',';  // getline drops a trailing empty part
  std::istringstream parts(text);
  for (std::string part; std::getline(parts, part, ',');) {
    double value = -1;
    const auto [end, error] = std::from_chars(part.data(), part.data() + part.size(), value);
    ok = ok && error == std::errc() && end == part.data() + part.size() && std::isfinite(value) &&
         value >= 0;
    values.push_back(value);
  }
  if (!ok || values.size() != 3)
    throw InvalidArgument("--costs expects F,I,W: the time of a forward, an input-gradient "
                          "backward and a weight-gradient backward of one stage, three "
                          "non-negative numbers such as 1,2,1; got '" + text + "'");
  return {values[0], values[1], values[2]};
}

// A traced run's step as it ran: printed, and drawn with --svg.
std::string traced_report(const ScheduleFlags& f) {
  const TracedStep step = read_traced_step(f.trace, f.step);
  if (!f.svg.empty()) {
    for (const TracedRank& r : step.ranks)  // the folder itself may hold the drawing
      check_output_is_not_input(
          f.svg, "--svg",
          (std::filesystem::path(f.trace) / ("rank_" + std::to_string(r.rank) + ".json")).string(),
          "a rank's trace");
    write_file_atomically(f.svg, traced_step_svg(step));
  }
  return traced_step_report(step);
}

std::string report(const ScheduleFlags& f) {
  if (!f.trace.empty()) return traced_report(f);
  if (f.file.empty() && (f.pp == 0 || f.microbatches == 0 || f.kind.empty()))
    throw InvalidArgument(
        "schedule needs --pp, --microbatches and --schedule, or --file (or --trace DIR for a "
        "traced run)");
  const PipelineStageCosts costs = parse_costs(f.costs);
  if (!f.svg.empty()) {
    check_output_is_not_input(f.svg, "--svg", f.file, "the --file schedule");
    write_file_atomically(
        f.svg, f.file.empty()
                   ? pipeline_schedule_svg(f.kind, f.pp, f.microbatches, f.virtual_stages, costs)
                   : pipeline_schedule_file_svg(f.file, costs));
  }
  if (!f.file.empty()) return pipeline_schedule_file_report(f.file, costs);
  return pipeline_schedule_report(f.kind, f.pp, f.microbatches, f.virtual_stages, costs);
}

}  // namespace

void add_schedule_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("schedule",
                                 "Print a pipeline schedule with its bubble fraction and peak "
                                 "activations, or a traced run's step as it ran");
  auto f = std::make_shared<ScheduleFlags>();
  auto* file = cmd->add_option("--file", f->file, "check a schedule written by hand (or by this "
                                                  "command) instead of generating one")
                   ->check(CLI::ExistingFile);
  cmd->add_option("--pp", f->pp, "pipeline ranks")
      ->check(CLI::Range(1, kMaxCount))
      ->excludes(file);
  cmd->add_option("--microbatches", f->microbatches, "micro-batches per step")
      ->check(CLI::Range(1, kMaxCount))
      ->excludes(file);
  cmd->add_option("--schedule", f->kind, "gpipe, 1f1b, interleaved or zb-h1")->excludes(file);
  cmd->add_option("--virtual", f->virtual_stages, "stages per rank for interleaved (default 2)")
      ->check(CLI::Range(1, kMaxCount))
      ->excludes(file);
  cmd->add_option("--costs", f->costs,
                  "F,I,W: time of one stage's forward, input-gradient and weight-gradient "
                  "backward; a full backward costs I+W")
      ->capture_default_str();
  cmd->add_option("--svg", f->svg,
                  "also draw the schedule as a timeline into this SVG file (opens in a browser)");
  auto* trace = cmd->add_option("--trace", f->trace,
                                "read the pipeline as a run executed it from its traces "
                                "(meshtrain train --trace DIR) instead of generating one")
                    ->excludes(file);
  for (const char* generating : {"--pp", "--microbatches", "--schedule", "--virtual", "--costs"})
    trace->excludes(cmd->get_option(generating));
  cmd->add_option("--step", f->step, "the traced step to read (default: the last)")
      ->check(CLI::PositiveNumber)
      ->needs(trace);
  cmd->callback([f] { std::cout << report(*f); });
}

}  // namespace meshtrain
