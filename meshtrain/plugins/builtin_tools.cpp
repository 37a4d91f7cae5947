#include "meshtrain/plugins/builtin_tools.h"

#include <fstream>
#include <iomanip>
#include <sstream>

#include "meshtrain/core/error.h"
#include "meshtrain/plugins/pp/schedule_generators.h"
#include "meshtrain/plugins/pp/schedule_sim.h"

namespace meshtrain {

namespace {

std::string report(const Schedule& schedule, const PipelineStageCosts& stage_costs) {
  const Costs costs{stage_costs.forward, stage_costs.backward_input, stage_costs.backward_weight};
  const Simulation sim = simulate(schedule, costs);
  std::ostringstream out;
  out << schedule.to_string() << "\n"
      << "costs F=" << costs.forward << " I=" << costs.backward_input
      << " W=" << costs.backward_weight << " (B = I + W), makespan " << sim.makespan
      << ", bubble fraction " << std::fixed << std::setprecision(4) << sim.bubble_fraction
      << std::defaultfloat << std::setprecision(6) << "\n"
      << "rank  busy  idle  peak activations (micro-batches held, counted per stage)\n";
  for (int r = 0; r < schedule.ranks; ++r)
    out << std::setw(4) << r << std::setw(6) << sim.busy[r] << std::setw(6) << sim.idle[r]
        << std::setw(6) << sim.peak_in_flight[r] << "\n";
  return out.str();
}

Schedule read_schedule_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in.good() && !in.eof()) throw IoError("cannot read the schedule file '" + path + "'");
  try {
    return parse_schedule(text.str());
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(path + ": " + e.what());
  }
}

}  // namespace

std::string pipeline_schedule_report(std::string_view kind, int ranks, int micro_batches,
                                     int virtual_stages, const PipelineStageCosts& costs) {
  const ScheduleKind parsed = parse_schedule_kind(kind);
  if (virtual_stages == 0) virtual_stages = parsed == ScheduleKind::interleaved ? 2 : 1;
  return report(make_schedule(parsed, ranks, micro_batches, virtual_stages), costs);
}

std::string pipeline_schedule_file_report(const std::string& path,
                                          const PipelineStageCosts& costs) {
  return report(read_schedule_file(path), costs);
}

}  // namespace meshtrain
