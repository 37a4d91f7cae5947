// A real run's pipeline timeline, read back from the Chrome traces that `meshtrain train --trace
// DIR` writes (DIR/rank_<r>.json, docs/tracing.md): one optimizer step as each rank ran it, its
// pipeline actions (the runner's `pipeline 1F3` spans), the update after them and the exposed
// communication waits, at their measured times. `meshtrain schedule --trace DIR` prints it and,
// with --svg, draws it like the simulator's schedules (svg_timeline.h), so the two compare.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace meshtrain {

// Times are milliseconds from the step's start on the earliest rank. The ranks of one host share
// the monotonic clock; ranks on other hosts would each keep their own.
struct TracedSpan {
  std::string name;  // "1F3" for an action, "recv from 0" for a wait
  double start_ms = 0, end_ms = 0;
};

struct TracedAction {
  TracedSpan span;  // from the action's start: its wait for input, then its layers
  int stage = 0;
  char kind = 'F';  // F, B, I or W
  int micro_batch = 0;
  double compute_start_ms = 0;  // where its first layer began (span.start_ms when it has none)
};

struct TracedRank {
  int rank = 0;
  TracedSpan step;                    // this rank's step span
  std::vector<TracedAction> actions;  // in the order run
  std::optional<TracedSpan> update;   // the optimizer update after the pipeline
  std::vector<TracedSpan> waits;      // every exposed wait of the step, inside actions or not
};

struct TracedStep {
  std::string dir;
  int64_t step = 0;  // as the step line numbers them, from 1
  int micro_batches = 0;
  std::vector<TracedRank> ranks;  // in rank order
  // The run's mesh as the traces name it ("pp=2,dp_shard=2,tp=2"); "" in traces without one.
  std::string mesh;
};

// Step `step` (0: the last step that every rank's trace holds) of the traces in `dir`.
// InvalidArgument for a folder that does not exist or holds no rank_<r>.json, a file that is not a
// trace, a step that some rank's trace lacks, and a step with no pipeline action (a run that was
// not pipelined).
TracedStep read_traced_step(const std::string& dir, int64_t step);

// Per rank: the actions in the order run, then its step time split into computing (the actions'
// layers), waiting (the exposed waits) and the rest.
std::string traced_step_report(const TracedStep& step);

// The step as a timeline (an SVG document): a lane per rank, a box per action from its first layer
// to its end in the simulator's colours, the update, the waits as boxes of their own colour over
// them, the idle time in grey, and an arrow per transfer between stages (as the simulator's
// drawing has), from the end of the action that sent it to where the one that received it began
// computing: a forward's output to the next stage's forward of its micro-batch, a backward's (B,
// or I under zero bubble) input gradient to the previous stage's. The stages of one pipeline are
// the ranks that share every mesh coordinate but pp; a trace without a mesh has one pipeline,
// and a transfer whose receiver is not one action of it is not drawn.
std::string traced_step_svg(const TracedStep& step);

}  // namespace meshtrain
