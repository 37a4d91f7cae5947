// meshtrain sweep: layouts trained for a few steps on the local backend against the planner's
// prediction of each (meshtrain/plan/sweep.h), as a table, CSV and JSON.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "meshtrain/checkpoint/durable_files.h"
#include "meshtrain/cli/commands.h"
#include "meshtrain/cli/machine_flags.h"
#include "meshtrain/cli/run_flags.h"
#include "meshtrain/core/error.h"
#include "meshtrain/plan/sweep.h"

namespace meshtrain {

namespace {

struct SweepFlags : RunFlags {
  std::shared_ptr<MachineFlags> machine = std::make_shared<MachineFlags>();
  std::string layouts = "auto";
  int rounds = 5;
  std::string csv, json;
};

// The layouts to run, one set of train flags each: auto's, or a file's lines (blank lines and
// lines starting with # skipped).
std::vector<std::string> layout_lines(const std::string& layouts, int world) {
  if (layouts == "auto") return auto_sweep_layouts(world);
  std::istringstream text(read_small_file(layouts));
  std::vector<std::string> lines;
  for (std::string line; std::getline(text, line);) {
    const size_t first = line.find_first_not_of(" \t");
    if (first != std::string::npos && line[first] != '#') lines.push_back(line.substr(first));
  }
  MT_CHECK(!lines.empty(), "--layouts ", layouts, ": no layouts (one line of train flags each)");
  return lines;
}

// The sweep's run flags with one layout's flags over them.
TrainConfig layout_config(const SweepFlags& base, const std::string& line,
                          const Registries& registries) {
  auto flags = std::make_shared<RunFlags>(static_cast<const RunFlags&>(base));
  CLI::App parser;
  add_workload_flags(&parser, flags);
  add_layout_flags(&parser, flags, registries);
  try {
    parser.parse(line, /*program_name_included=*/false);
  } catch (const CLI::ParseError& e) {
    throw InvalidArgument(detail::concat("layout '", line, "': ", e.what()));
  }
  MT_CHECK(flags->config.world == base.config.world, "layout '", line,
           "': the sweep's ranks are --world ", base.config.world,
           " for every layout (its calibration and threads follow them); give the mesh only");
  apply_run_flags(*flags, registries);
  return flags->config;
}

// "+12.3%", or "n/a" where nothing was measured.
std::string percent(double error) {
  if (std::isnan(error)) return "n/a";
  char text[16];
  std::snprintf(text, sizeof text, "%+.1f%%", 100 * error);
  return text;
}

std::string fixed(double value, int decimals) {
  std::ostringstream text;
  text << std::fixed << std::setprecision(decimals) << value;
  return text.str();
}

// One line per layout, its name first at whatever length (a file's lines may be long).
void print_row(const SweepRow& row, std::ostream& out) {
  constexpr double kMiB = 1024.0 * 1024.0;
  out << "  " << std::left << std::setw(62) << row.layout << std::right;
  for (const auto& [measured, predicted, error, decimals] :
       {std::tuple{1e3 * row.measured.step_s, 1e3 * row.predicted.step_s, row.step_error(), 2},
        std::tuple{row.measured.peak / kMiB, row.predicted.peak / kMiB, row.peak_error(), 2},
        std::tuple{row.measured.sent / kMiB, row.predicted.sent / kMiB, row.sent_error(), 3}})
    out << " " << std::setw(9) << fixed(measured, decimals) << " " << std::setw(9)
        << fixed(predicted, decimals) << " " << std::setw(8) << percent(error);
  out << std::endl;
}

void print_summary(const std::vector<SweepRow>& rows, std::ostream& out) {
  std::vector<double> step_errors;  // a step is always measured: no NaN
  for (const SweepRow& r : rows) step_errors.push_back(std::abs(r.step_error()));
  const size_t worst =
      std::max_element(step_errors.begin(), step_errors.end()) - step_errors.begin();
  double peak_worst = 0;
  for (const SweepRow& r : rows)
    if (!std::isnan(r.peak_error())) peak_worst = std::max(peak_worst, std::abs(r.peak_error()));
  char line[256];
  std::snprintf(line, sizeof line,
                "\nstep time: median |error| %.1f%%, largest %.1f%% (%s); peak memory: largest "
                "|error| %.1f%%\n",
                100 * median(step_errors), 100 * step_errors[worst], rows[worst].layout.c_str(),
                100 * peak_worst);
  out << line;
}

// Writes `text` to `path` whole or not at all.
void write_output(const std::string& path, const std::string& what, const std::string& text) {
  check_regular_output(path, what);
  write_file_atomically(path, text);
}

// A CSV field's text inside its quotes: each quote doubled.
std::string quoted_csv(const std::string& text) {
  std::string out;
  for (const char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out;
}

std::string rows_csv(const std::vector<SweepRow>& rows) {
  std::ostringstream csv;
  csv.precision(9);
  csv << "layout,measured_step_s,predicted_step_s,step_error,measured_peak_bytes,"
         "predicted_peak_bytes,peak_error,measured_sent_bytes,predicted_sent_bytes,sent_error\n";
  for (const SweepRow& r : rows)
    csv << '"' << quoted_csv(r.layout) << "\"," << r.measured.step_s << ',' << r.predicted.step_s
        << ',' << r.step_error() << ',' << r.measured.peak << ',' << r.predicted.peak << ','
        << r.peak_error() << ',' << r.measured.sent << ',' << r.predicted.sent << ','
        << r.sent_error() << '\n';
  return csv.str();
}

std::string rows_json(const std::vector<SweepRow>& rows, const std::string& machine) {
  nlohmann::ordered_json out = {{"machine", machine}, {"layouts", nlohmann::ordered_json::array()}};
  const auto figures = [](const SweepFigures& f) {
    return nlohmann::ordered_json{
        {"step_s", f.step_s}, {"peak_bytes", f.peak}, {"sent_bytes", f.sent}};
  };
  for (const SweepRow& r : rows)
    out["layouts"].push_back({{"layout", r.layout},
                              {"measured", figures(r.measured)},
                              {"predicted", figures(r.predicted)},
                              {"step_error", r.step_error()},
                              {"peak_error", r.peak_error()},
                              {"sent_error", r.sent_error()}});
  return out.dump(1) + "\n";
}

}  // namespace

void add_sweep_command(CLI::App& app, const Registries& registries) {
  auto* cmd = app.add_subcommand(
      "sweep",
      "Train layouts for a few steps on the local backend and print each one's measured step "
      "time, peak memory and bytes sent against the planner's prediction (docs/planner.md)");
  auto f = std::make_shared<SweepFlags>();
  TrainConfig& c = f->config;
  c.steps = 10;
  add_model_choice_flags(cmd, f, registries.models);
  add_workload_flags(cmd, f);
  add_layout_flags(cmd, f, registries);
  cmd->add_option("--data", c.data_path, "token file (meshtrain prepare makes one)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--steps", c.steps, "steps per layout; the first is not timed")
      ->capture_default_str()
      ->check(CLI::Range(3, 1000000));
  cmd->add_option("--threads", c.threads,
                  "CPU threads per rank (default: this machine's CPUs split among its ranks)")
      ->check(kPositiveInteger);
  cmd->add_option("--layouts", f->layouts,
                  "auto (13 layouts over every strategy, schedule and checkpointing mode; 12 "
                  "without 3D when --world is not a multiple of 4), or a "
                  "file with one layout per line as train flags, e.g. --mesh pp=2,dp_shard=2 "
                  "--pp-schedule 1f1b --grad-accum 4")
      ->capture_default_str();
  cmd->add_option("--rounds", f->rounds,
                  "rounds, each training every layout once in turn; a layout's step time is the "
                  "median over them (this machine's pace drifts from minute to minute)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  add_machine_flags(cmd, f->machine, "cpu");
  cmd->add_option("--csv", f->csv, "also write the table as CSV")->check(kNonEmptyPath);
  cmd->add_option("--json", f->json, "also write the table as JSON")->check(kNonEmptyPath);
  cmd->callback([f, &registries] {
    const int world = f->config.world;
    const std::vector<std::string> lines = layout_lines(f->layouts, world);
    std::vector<SweepLayout> layouts;  // every layout checked before the first one trains
    for (const std::string& line : lines) {
      TrainConfig c = layout_config(*f, line, registries);
      c.sample_bytes = 0;
      c.validate();
      layouts.push_back({line, std::move(c)});
    }
    const int threads = f->config.threads_per_rank();
    // Calibrating, a round of the calibration goes before each of the sweep's rounds, so that the
    // profile sees the same minutes of this machine as the runs it predicts.
    const bool calibrating = !f->machine->calibrate.empty();
    std::optional<Calibration> calibration;
    MachineProfile machine;
    if (calibrating)
      calibration.emplace(start_calibration(*f->machine, world, threads, std::cout));
    else
      machine = machine_of(*f->machine, world, threads, std::cout);
    std::cout << "sweep: " << layouts.front().config.model->describe() << " on " << world
              << " local ranks, " << threads << " thread(s) each, global batch " << f->config.batch
              << " x " << f->config.seq << " tokens, " << f->config.steps << " steps per layout in "
              << f->rounds
              << " round(s), each over every layout (step time: the median after the first, "
                 "then over the rounds), predicted on "
              << (calibrating ? "this machine, a round of its calibration before each round"
                              : machine.name)
              << "\n\n";
    char header[256];
    std::snprintf(header, sizeof header, "  %-62s %9s %9s %8s %8s %8s %8s %8s %8s %8s\n", "layout",
                  "step ms", "predicted", "error", "peak MiB", "predicted", "error", "sent MiB",
                  "predicted", "error");
    bool table_started = false;
    const auto print = [&](const SweepRow& row) {
      if (!table_started) std::cout << header;
      table_started = true;
      print_row(row, std::cout);
    };
    int round = 0;
    const std::vector<SweepRow> rows =
        calibrating ? sweep_layouts(
                          layouts, f->rounds,
                          [&] {
                            std::cout << "round " << ++round << "/" << f->rounds
                                      << ": calibrating, then the layouts" << std::endl;
                            calibration->measure_round();
                          },
                          [&] {
                            std::cout << "\n";
                            machine =
                                finish_calibration(*f->machine, calibration->finish(), std::cout);
                            return machine;
                          },
                          print)
                    : sweep_layouts(layouts, machine, f->rounds, print);
    print_summary(rows, std::cout);
    if (!f->csv.empty()) write_output(f->csv, "--csv", rows_csv(rows));
    if (!f->json.empty()) write_output(f->json, "--json", rows_json(rows, machine.name));
  });
}

}  // namespace meshtrain
