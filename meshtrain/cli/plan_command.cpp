#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "meshtrain/checkpoint/durable_files.h"
#include "meshtrain/cli/commands.h"
#include "meshtrain/cli/layout_search_output.h"
#include "meshtrain/cli/machine_flags.h"
#include "meshtrain/cli/memory_svg.h"
#include "meshtrain/cli/run_flags.h"
#include "meshtrain/core/error.h"
#include "meshtrain/core/memory.h"
#include "meshtrain/plan/layout_search.h"
#include "meshtrain/plan/machine_profile.h"
#include "meshtrain/plan/rank_replay.h"
#include "meshtrain/plan/step_time.h"
#include "meshtrain/train/dry_run.h"

namespace meshtrain {

namespace {

struct PlanFlags : RunFlags {
  std::shared_ptr<MachineFlags> machine = std::make_shared<MachineFlags>();
  bool json = false;
  int top = 10;
  std::string svg;  // also draw memory per rank into this file
};

// What the plan predicts beyond the replays, and on what.
struct Prediction {
  MachineProfile machine;
  StepTimePrediction time{};
  Throughput throughput{};
};

Prediction predict(const TrainConfig& config, const PlanLayout& layout, const Workload& workload,
                   const RankReplays& ranks, MachineProfile machine) {
  Prediction p{.machine = std::move(machine)};
  p.time = predict_step_time(layout, workload, ranks, p.machine);
  p.throughput = predicted_throughput(*config.model, layout, workload, p.time.step, p.machine);
  return p;
}

// The rank whose step peaks highest (the first of equals).
int largest_peak(const RankReplays& ranks) {
  int largest = 0;
  for (int r = 1; r < ranks.size(); ++r)
    if (ranks[r].memory.total.peak > ranks[largest].memory.total.peak) largest = r;
  return largest;
}

nlohmann::ordered_json rank_time_json(const RankStepTime& time) {
  nlohmann::ordered_json exposed = nlohmann::ordered_json::object();
  for (const auto& [group, seconds] : time.exposed_comm) exposed[group] = seconds;
  return {{"compute", time.compute},
          {"exposed_comm", exposed},
          {"bubble", time.bubble},
          {"cores_wait", time.cores_wait}};
}

// For scripts: the plan's figures, every rank's, in bytes and seconds.
void print_plan_json(const TrainConfig& config, const PlanLayout& layout,
                     const RankReplays& ranks, const Prediction& predicted,
                     std::ostream& out) {
  const double capacity_bytes = predicted.machine.device_memory;
  nlohmann::ordered_json ranks_json = nlohmann::ordered_json::array();
  for (int r = 0; r < ranks.size(); ++r) {
    const MemoryStats& m = ranks[r].memory;
    nlohmann::ordered_json sent = nlohmann::ordered_json::object();
    for (const auto& [group, bytes] : ranks[r].sent()) sent[group] = bytes;
    nlohmann::ordered_json calls = nlohmann::ordered_json::object();
    for (const auto& [group, count] : ranks[r].calls()) calls[group] = count;
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
                          {"sent", sent},
                          {"calls", calls},
                          {"time", rank_time_json(predicted.time.ranks[r])}});
  }
  const int largest = largest_peak(ranks);
  nlohmann::ordered_json plan = {
      {"model",
       {{"family", config.model->family()},
        {"describe", config.model->describe()},
        {"parameters", config.model->num_parameters()}}},
      {"layout", layout.to_string()},
      {"workload",
       {{"batch", config.batch}, {"seq", config.seq}, {"micro_batches", config.grad_accum}}},
      {"machine", predicted.machine.name},
      {"largest_peak_rank", largest},
      {"device_memory", capacity_bytes},
      {"fits", static_cast<double>(ranks[largest].memory.total.peak) <= capacity_bytes},
      {"step_seconds", predicted.time.step},
      {"slowest_rank", predicted.time.slowest},
      {"tokens_per_s", predicted.throughput.tokens_per_s},
      {"tokens_per_s_per_device", predicted.throughput.tokens_per_s / static_cast<double>(ranks.size())},
      {"mfu", predicted.throughput.mfu}};
  plan["ranks"] = std::move(ranks_json);
  out << plan.dump(1) << "\n";
}

// The predicted step of the slowest rank, its terms, and the throughput they give.
void print_step_time(const Prediction& p, int ranks, std::ostream& out) {
  const RankStepTime& slowest = p.time.ranks[p.time.slowest];
  out << "\nstep time on " << p.machine.name
      << " (predicted: docs/planner.md): " << duration_text(p.time.step) << "\n";
  std::string exposed;
  for (const auto& [group, seconds] : slowest.exposed_comm)
    if (seconds > 0)
      exposed += (exposed.empty() ? " (" : ", ") + group + " " + duration_text(seconds);
  out << "  rank " << p.time.slowest << " (the slowest): compute " << duration_text(slowest.compute)
      << ", exposed communication " << duration_text(slowest.total_exposed_comm())
      << (exposed.empty() ? "" : exposed + ")") << ", pipeline bubble "
      << duration_text(slowest.bubble);
  if (slowest.cores_wait > 0)
    out << ", waiting for the node's shared cores " << duration_text(slowest.cores_wait);
  out << "\n";
  char line[160];
  std::snprintf(line, sizeof line, "  %.0f tokens/s, %.1f per device; MFU %.1f%%\n", p.throughput.tokens_per_s,
                p.throughput.tokens_per_s / static_cast<double>(ranks), 100 * p.throughput.mfu);
  out << line;
}

void print_plan(const TrainConfig& config, const PlanLayout& layout,
                const RankReplays& ranks, double seconds, const Prediction& predicted,
                std::ostream& out) {
  const double capacity_bytes = predicted.machine.device_memory;
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
  for (int r = 0; r < ranks.size(); ++r) {
    memory.push_back(ranks[r].memory);
    sent.push_back(ranks[r].sent());
  }
  print_rank_tables(memory, sent, out);
  const int largest = largest_peak(ranks);
  const double peak = static_cast<double>(ranks[largest].memory.total.peak);
  std::snprintf(line, sizeof line, "%s: rank %d peaks at %.1f GiB, %s %.1f GiB per device\n",
                peak <= capacity_bytes ? "fits" : "does not fit", largest, peak / kGiB,
                peak <= capacity_bytes ? "within" : "over", capacity_bytes / kGiB);
  out << "\n" << line;
  print_step_time(predicted, ranks.size(), out);
}

// Without --mesh: every layout of the search space, ranked (meshtrain/plan/layout_search.h).
void search(const CLI::App& cmd, const PlanFlags& f) {
  // The search's choices, and the FSDP options whose meaning changes with them (the space leaves
  // each to FSDP's default for the mode and the pipeline).
  for (const char* flag :
       {"--fsdp", "--pp-schedule", "--virtual", "--sequence-parallel", "--ac", "--grad-accum",
        "--pp-layers", "--axis-plugins", "--reshard-after-forward", "--grad-sync", "--offload"})
    MT_CHECK(cmd.count(flag) == 0, flag,
             " sets part of one layout, which the search chooses itself: give --mesh with it to "
             "plan that layout, or leave it out to search them all (docs/planner.md)");
  const TrainConfig& c = f.config;
  const MachineProfile machine =
      machine_of(*f.machine, c.world, c.threads_per_rank(), f.json ? std::cerr : std::cout);
  const SearchSpace space{.world = c.world,
                          .workload = {.batch = c.batch, .seq = c.seq},
                          .base = plan_layout(c)};
  const auto start = std::chrono::steady_clock::now();
  const LayoutSearch found = search_layouts(*c.model, space, machine);
  MT_CHECK(!found.fitting.empty() || !found.not_fitting.empty(),
           "plan: the run would refuse every "
           "layout of the ",
           c.world, " devices searched (docs/planner.md), the first: ",
           found.refused.empty() ? std::string("none") : found.refused.front());
  const SearchReport report{
      .model = *c.model,
      .space = space,
      .machine = machine,
      .search = found,
      .seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
      .top = f.top};
  if (!f.svg.empty()) write_file_atomically(f.svg, search_memory_svg(report));
  if (f.json)
    print_layout_search_json(report, std::cout);
  else
    print_layout_search(report, std::cout);
}

}  // namespace

void add_plan_command(CLI::App& app, const Registries& registries) {
  auto* cmd = app.add_subcommand(
      "plan",
      "Predict a layout's memory per rank by category, bytes sent per mesh axis and step time, "
      "for any world size, in a second, by replaying each rank's step alone on shape-only "
      "tensors; without --mesh, search the layouts of --world devices and rank them by "
      "predicted throughput (docs/planner.md)");
  auto f = std::make_shared<PlanFlags>();
  add_model_choice_flags(cmd, f, registries.models);
  add_workload_flags(cmd, f);
  add_layout_flags(cmd, f, registries);
  add_machine_flags(cmd, f->machine, "h100-sxm");
  cmd->add_option("--threads", f->config.threads,
                  "CPU threads per rank while calibrating (default: this machine's CPUs split "
                  "among --world ranks)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--gpus", f->config.world, "devices to search layouts for: --world")
      ->excludes(cmd->get_option("--world"));
  cmd->add_option("--top", f->top, "layouts shown of those that fit and of those that do not")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--svg", f->svg,
                  "also draw memory per rank by category as stacked bars into this SVG file (opens "
                  "in a browser): each rank of --mesh's layout, or the searched layouts shown");
  cmd->add_flag("--json", f->json,
                "print the plan as JSON instead of tables: the model, layout and workload, and "
                "each rank's memory by category and bytes sent per group, in bytes");
  cmd->callback([cmd, f, &registries] {
    apply_run_flags(*f, registries);
    check_output_is_not_input(f->svg, "--svg", f->machine->machine_file, "the --machine-file");
    check_output_is_not_input(f->svg, "--svg", f->machine->calibrate, "the --calibrate profile");
    TrainConfig& c = f->config;
    c.device = DeviceKind::meta;
    if (f->mesh.empty()) return search(*cmd, *f);
    c.check_layout();
    const PlanLayout layout = plan_layout(c);
    const auto start = std::chrono::steady_clock::now();
    const RankReplays ranks = replay_ranks(*c.model, layout, plan_workload(c));
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    // Under --json, stdout holds the JSON alone.
    MachineProfile machine =
        machine_of(*f->machine, c.world, c.threads_per_rank(), f->json ? std::cerr : std::cout);
    const Prediction predicted = predict(c, layout, plan_workload(c), ranks, machine);
    if (!f->svg.empty()) {
      std::vector<MemoryStats> memory;
      for (int r = 0; r < ranks.size(); ++r) memory.push_back(ranks[r].memory);
      write_file_atomically(
          f->svg, layout_memory_svg(detail::concat("memory per rank (GiB): ", layout.to_string()),
                                    memory, machine.device_memory));
    }
    if (f->json)
      print_plan_json(c, layout, ranks, predicted, std::cout);
    else
      print_plan(c, layout, ranks, seconds, predicted, std::cout);
  });
}

}  // namespace meshtrain
