#include "meshtrain/plugins/builtin_tools.h"

#include <cstdio>
#include <fstream>
#include <iomanip>
#include <map>
#include <sstream>

#include "meshtrain/core/error.h"
#include "meshtrain/plugins/pp/schedule_generators.h"
#include "meshtrain/plugins/pp/schedule_sim.h"
#include "meshtrain/report/svg_timeline.h"

namespace meshtrain {

namespace {

Costs costs_of(const PipelineStageCosts& stage_costs) {
  return {stage_costs.forward, stage_costs.backward_input, stage_costs.backward_weight};
}

std::string report(const Schedule& schedule, const PipelineStageCosts& stage_costs) {
  const Costs costs = costs_of(stage_costs);
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

std::string drawing(const Schedule& schedule, const PipelineStageCosts& stage_costs,
                    const std::string& name) {
  const Simulation sim = simulate(schedule, costs_of(stage_costs));
  Timeline t;
  char bubble[32];
  std::snprintf(bubble, sizeof bubble, "%.1f%%", 100.0 * sim.bubble_fraction);
  t.title = detail::concat(name, ": ", schedule.ranks, " ranks, ", schedule.micro_batches,
                           " micro-batches, ", schedule.virtual_stages,
                           " stage(s) per rank; makespan ", sim.makespan, ", bubble ", bubble);
  t.time_unit = detail::concat("time (F=", stage_costs.forward, " I=", stage_costs.backward_input,
                               " W=", stage_costs.backward_weight, ", B=I+W)");
  std::map<Action, std::pair<int, double>> posted;  // send -> its lane and time
  for (int r = 0; r < schedule.ranks; ++r) {
    t.lanes.push_back("rank " + std::to_string(r));
    for (const TimedAction& a : sim.timeline[r]) {
      if (is_send(a.action.kind)) posted[a.action] = {r, a.end};
      if (!is_compute(a.action.kind)) continue;
      const std::string label = to_string(a.action);
      t.boxes.push_back(
          {r, a.start, a.end, label, pipeline_action_color(action_kind_name(a.action.kind)[0]),
           detail::concat("rank ", r, ": ", label, " from ", a.start, " to ", a.end)});
    }
  }
  for (int r = 0; r < schedule.ranks; ++r)
    for (const TimedAction& a : sim.timeline[r])
      if (is_recv(a.action.kind)) {
        const auto& [lane, time] = posted.at(matching_transfer(a.action));
        t.arrows.push_back({lane, time, r, a.end});
      }
  t.legend = pipeline_legend();
  return svg_timeline(t);
}

Schedule generated(std::string_view kind, int ranks, int micro_batches, int virtual_stages) {
  const ScheduleKind parsed = parse_schedule_kind(kind);
  if (virtual_stages == 0) virtual_stages = parsed == ScheduleKind::interleaved ? 2 : 1;
  return make_schedule(parsed, ranks, micro_batches, virtual_stages);
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
  return report(generated(kind, ranks, micro_batches, virtual_stages), costs);
}

std::string pipeline_schedule_file_report(const std::string& path,
                                          const PipelineStageCosts& costs) {
  return report(read_schedule_file(path), costs);
}

std::string pipeline_schedule_svg(std::string_view kind, int ranks, int micro_batches,
                                  int virtual_stages, const PipelineStageCosts& costs) {
  return drawing(generated(kind, ranks, micro_batches, virtual_stages), costs, std::string(kind));
}

std::string pipeline_schedule_file_svg(const std::string& path, const PipelineStageCosts& costs) {
  return drawing(read_schedule_file(path), costs, path);
}

}  // namespace meshtrain
