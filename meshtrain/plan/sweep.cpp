#include "meshtrain/plan/sweep.h"

#include <algorithm>
#include <limits>
#include <sstream>

#include "meshtrain/core/error.h"
#include "meshtrain/plan/rank_replay.h"
#include "meshtrain/plan/step_time.h"
#include "meshtrain/train/run_training.h"

namespace meshtrain {

namespace {

double relative_error(double predicted, double measured) {
  if (measured == 0) return predicted == 0 ? 0.0 : std::numeric_limits<double>::quiet_NaN();
  return predicted / measured - 1;
}

SweepFigures measure(const TrainConfig& config) {
  std::ostringstream discarded;  // the run's console
  const std::vector<StepMetrics> steps = run_training(config, discarded, /*interactive=*/false);
  MT_CHECK(steps.size() >= 3, "sweep: ", steps.size(), " steps ran, at least 3 expected");
  std::vector<double> times;
  for (size_t s = 1; s < steps.size(); ++s) times.push_back(steps[s].step_time_s);
  return {.step_s = median(std::move(times)),
          .peak = steps.back().peak_mem_bytes,
          .sent = steps.back().comm_bytes};
}

// A layout as the planner sees it: its replayed ranks, before anything trains.
struct Replayed {
  PlanLayout layout;
  Workload workload;
  RankReplays ranks;
};

Replayed replay(const TrainConfig& config) {
  Replayed out{.layout = plan_layout(config), .workload = plan_workload(config), .ranks = {}};
  out.ranks = replay_ranks(*config.model, out.layout, out.workload);
  return out;
}

SweepFigures predict(const Replayed& replayed, const MachineProfile& machine) {
  SweepFigures out{
      .step_s =
          predict_step_time(replayed.layout, replayed.workload, replayed.ranks, machine).step};
  for (const ReplayedRank& r : replayed.ranks.distinct()) {
    out.peak = std::max<uint64_t>(out.peak, r.memory.total.peak);
    uint64_t sent = 0;
    for (const auto& [group, bytes] : r.sent()) sent += bytes;
    out.sent = std::max(out.sent, sent);
  }
  return out;
}

}  // namespace

double median(std::vector<double> values) {
  MT_CHECK(!values.empty(), "median: no values");
  const size_t middle = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + middle, values.end());
  if (values.size() % 2) return values[middle];
  return (values[middle] + *std::max_element(values.begin(), values.begin() + middle)) / 2;
}

double SweepRow::step_error() const { return relative_error(predicted.step_s, measured.step_s); }
double SweepRow::peak_error() const {
  return relative_error(static_cast<double>(predicted.peak), static_cast<double>(measured.peak));
}
double SweepRow::sent_error() const {
  return relative_error(static_cast<double>(predicted.sent), static_cast<double>(measured.sent));
}

std::vector<SweepRow> sweep_layouts(const std::vector<SweepLayout>& layouts,
                                    const MachineProfile& machine, int rounds,
                                    const std::function<void(const SweepRow&)>& on_row) {
  return sweep_layouts(
      layouts, rounds, {}, [&] { return machine; }, on_row);
}

std::vector<SweepRow> sweep_layouts(const std::vector<SweepLayout>& layouts, int rounds,
                                    const std::function<void()>& before_round,
                                    const std::function<MachineProfile()>& machine,
                                    const std::function<void(const SweepRow&)>& on_row) {
  MT_CHECK(!layouts.empty(), "sweep: no layouts");
  MT_CHECK(rounds >= 1, "sweep: at least one round per layout, got ", rounds);
  std::vector<Replayed> replayed;
  for (const SweepLayout& layout : layouts) {  // the planner's checks first, before anything trains
    MT_CHECK(layout.config.steps >= 3, "sweep: at least 3 steps per layout (the first is not ",
             "timed), got ", layout.config.steps, " for ", layout.name);
    TrainConfig meta = layout.config;
    meta.device = DeviceKind::meta;
    meta.check_layout();
    replayed.push_back(replay(meta));
  }
  std::vector<SweepRow> rows(layouts.size());
  std::vector<std::vector<double>> step_s(layouts.size());
  for (int round = 0; round < rounds; ++round) {
    if (before_round) before_round();
    for (size_t i = 0; i < layouts.size(); ++i) {
      rows[i].measured = measure(layouts[i].config);
      step_s[i].push_back(rows[i].measured.step_s);
    }
  }
  const MachineProfile profile = machine();
  for (size_t i = 0; i < layouts.size(); ++i) {
    rows[i].layout = layouts[i].name;
    rows[i].measured.step_s = median(std::move(step_s[i]));
    rows[i].predicted = predict(replayed[i], profile);
    if (on_row) on_row(rows[i]);
  }
  return rows;
}

std::vector<std::string> auto_sweep_layouts(int world) {
  MT_CHECK(world >= 4 && world % 2 == 0,
           "sweep --layouts auto: an even world of at least 4 ranks, got ", world);
  const std::string w = std::to_string(world), half = std::to_string(world / 2),
                    quarter_dp = world % 4 == 0 ? std::to_string(world / 4) : "";
  const std::string pp = "--grad-accum 4 --mesh pp=2,dp_shard=" + half + " --pp-schedule ";
  std::vector<std::string> layouts = {
      "--grad-accum 2 --mesh dp_shard=" + w + " --fsdp full",
      "--grad-accum 2 --mesh dp_shard=" + w + " --fsdp grad_op",
      "--grad-accum 2 --mesh dp_shard=" + w + " --fsdp none",
      "--grad-accum 2 --mesh dp_replicate=2,dp_shard=" + half + " --fsdp hybrid",
      "--grad-accum 2 --mesh dp_shard=" + half + ",tp=2",
      "--grad-accum 2 --mesh dp_shard=" + half + ",tp=2 --sequence-parallel",
      pp + "gpipe",
      pp + "1f1b",
      pp + "interleaved",
      pp + "zb-h1",
      "--grad-accum 2 --mesh dp_shard=" + w + " --ac full",
      "--grad-accum 2 --mesh dp_shard=" + w + " --ac selective",
  };
  if (!quarter_dp.empty())
    layouts.push_back("--grad-accum 4 --mesh pp=2,dp_shard=" + quarter_dp +
                      ",tp=2 --pp-schedule 1f1b --sequence-parallel");
  return layouts;
}

}  // namespace meshtrain
