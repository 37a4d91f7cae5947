#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "meshtrain/cli/commands.h"
#include "meshtrain/cli/run_flags.h"
#include "meshtrain/core/error.h"
#include "meshtrain/plan/rank_replay.h"
#include "meshtrain/train/dry_run.h"

namespace meshtrain {

namespace {

struct PlanFlags : RunFlags {
  double device_memory_gib = 0;  // 0: no capacity to check against
  bool json = false;
};

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// The rank whose step peaks highest (the first of equals).
size_t largest_peak(const std::vector<ReplayedRank>& ranks) {
  const auto it = std::max_element(ranks.begin(), ranks.end(), [](const auto& a, const auto& b) {
    return a.memory.total.peak < b.memory.total.peak;
  });
  return static_cast<size_t>(it - ranks.begin());
}

// For scripts: the plan's figures, every rank's, in bytes.
void print_plan_json(const TrainConfig& config, const PlanLayout& layout,
                     const std::vector<ReplayedRank>& ranks, double capacity_bytes,
                     std::ostream& out) {
  nlohmann::ordered_json ranks_json = nlohmann::ordered_json::array();
  for (size_t r = 0; r < ranks.size(); ++r) {
    const MemoryStats& m = ranks[r].memory;
    nlohmann::ordered_json sent = nlohmann::ordered_json::object();
    for (const auto& [group, bytes] : ranks[r].sent) sent[group] = bytes;
    ranks_json.push_back({{"rank", r},
                          {"replayed", ranks[r].replayed},
                          {"memory",
                           {{"params", m[MemoryCategory::param].current},
                            {"grads", m[MemoryCategory::grad].current},
                            {"optimizer", m[MemoryCategory::optimizer].current},
                            {"full_params_peak", m[MemoryCategory::unsharded_param].peak},
                            {"full_grads_peak", m[MemoryCategory::unsharded_grad].peak},
                            {"activations_peak", m[MemoryCategory::activation].peak},
                            {"comm_peak", m[MemoryCategory::comm].peak},
                            {"peak", m.total.peak}}},
                          {"sent", sent}});
  }
  const size_t largest = largest_peak(ranks);
  nlohmann::ordered_json plan = {
      {"model",
       {{"family", config.model->family()},
        {"describe", config.model->describe()},
        {"parameters", config.model->num_parameters()}}},
      {"layout", layout.to_string()},
      {"workload",
       {{"batch", config.batch}, {"seq", config.seq}, {"micro_batches", config.grad_accum}}},
      {"largest_peak_rank", largest}};
  if (capacity_bytes > 0) {
    plan["device_memory"] = capacity_bytes;
    plan["fits"] = static_cast<double>(ranks[largest].memory.total.peak) <= capacity_bytes;
  }
  plan["ranks"] = std::move(ranks_json);
  out << plan.dump(1) << "\n";
}

void print_plan(const TrainConfig& config, const PlanLayout& layout,
                const std::vector<ReplayedRank>& ranks, double seconds, double capacity_bytes,
                std::ostream& out) {
  out << "plan: " << config.model->describe() << ", " << config.model->num_parameters()
      << " parameters, on " << ranks.size() << " ranks (" << layout.to_string()
      << "), global batch " << config.batch << " x " << config.seq << " tokens in "
      << config.grad_accum << " micro-batch" << (config.grad_accum > 1 ? "es" : "")
      << " per data rank\n";
  char line[160];
  std::snprintf(line, sizeof line, "%.2f", seconds);
  out << "  each rank's step replayed alone on shape-only tensors and groups, as a run counts it ("
      << line << " s; docs/planner.md)\n\n";
  std::vector<MemoryStats> memory;
  std::vector<BytesPerGroup> sent;
  for (const ReplayedRank& r : ranks) {
    memory.push_back(r.memory);
    sent.push_back(r.sent);
  }
  print_rank_tables(memory, sent, out);
  if (capacity_bytes <= 0) return;
  const size_t largest = largest_peak(ranks);
  const double peak = static_cast<double>(ranks[largest].memory.total.peak);
  std::snprintf(line, sizeof line, "%s: rank %zu peaks at %.1f GiB, %s %.1f GiB per device\n",
                peak <= capacity_bytes ? "fits" : "does not fit", largest, peak / kGiB,
                peak <= capacity_bytes ? "within" : "over", capacity_bytes / kGiB);
  out << "\n" << line;
}

}  // namespace

void add_plan_command(CLI::App& app, const Registries& registries) {
  auto* cmd = app.add_subcommand(
      "plan",
      "Predict a layout's memory per rank by category and bytes sent per mesh axis, for any "
      "world size, in a second, by replaying each rank's step alone on shape-only tensors "
      "(docs/planner.md)");
  auto f = std::make_shared<PlanFlags>();
  add_model_choice_flags(cmd, f, registries.models);
  add_workload_flags(cmd, f);
  add_layout_flags(cmd, f, registries);
  cmd->add_option("--device-memory", f->device_memory_gib,
                  "GiB each rank's device holds: say whether the largest peak fits")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--json", f->json,
                "print the plan as JSON instead of tables: the model, layout and workload, and "
                "each rank's memory by category and bytes sent per group, in bytes");
  cmd->callback([f, &registries] {
    apply_run_flags(*f, registries);
    TrainConfig& c = f->config;
    c.device = DeviceKind::meta;
    c.check_layout();
    const PlanLayout layout = plan_layout(c);
    const auto start = std::chrono::steady_clock::now();
    const std::vector<ReplayedRank> ranks = replay_ranks(*c.model, layout, plan_workload(c));
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (f->json)
      print_plan_json(c, layout, ranks, f->device_memory_gib * kGiB, std::cout);
    else
      print_plan(c, layout, ranks, seconds, f->device_memory_gib * kGiB, std::cout);
  });
}

}  // namespace meshtrain
