// What the built-in plugins offer programs besides their strategies, behind plain types, so that a
// program (the meshtrain command line) needs none of a plugin's own headers.
#pragma once

#include <string>
#include <string_view>

namespace meshtrain {

// The time of one pipeline stage's forward, input-gradient backward and weight-gradient backward;
// a full backward costs backward_input + backward_weight.
struct PipelineStageCosts {
  double forward = 1.0;
  double backward_input = 1.0;
  double backward_weight = 1.0;
};

// The pipeline schedule `kind` (gpipe, 1f1b, interleaved or zb-h1) for `ranks` ranks and
// `micro_batches` micro-batches, `virtual_stages` stages per rank (0: 2 for interleaved, 1
// otherwise), as text that pipeline_schedule_file_report reads back, then its replay with `costs`:
// makespan, bubble fraction, and each rank's busy and idle time and peak activations. Throws
// InvalidArgument naming a bad kind or size.
std::string pipeline_schedule_report(std::string_view kind, int ranks, int micro_batches,
                                     int virtual_stages, const PipelineStageCosts& costs);

// The same for the schedule in the file at `path`, written by hand or by the function above.
// Throws IoError when the file cannot be read, InvalidArgument naming the file when its text is
// not a schedule, and InvalidArgument naming the action when the schedule cannot run.
std::string pipeline_schedule_file_report(const std::string& path,
                                          const PipelineStageCosts& costs);

// The same schedules replayed with `costs` and drawn as a timeline, an SVG document that opens
// in a browser: a lane per rank, F, B, I and W in colours with their stage and micro-batch, the
// idle time in grey, an arrow per transfer from its send to its receive. Same errors.
std::string pipeline_schedule_svg(std::string_view kind, int ranks, int micro_batches,
                                  int virtual_stages, const PipelineStageCosts& costs);
std::string pipeline_schedule_file_svg(const std::string& path, const PipelineStageCosts& costs);

}  // namespace meshtrain
