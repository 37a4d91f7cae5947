#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "meshtrain/checkpoint/durable_files.h"
#include "meshtrain/cli/commands.h"
#include "meshtrain/cli/run_flags.h"
#include "meshtrain/core/error.h"
#include "meshtrain/core/ops/cpu/cpu_threads.h"
#include "meshtrain/plan/calibrate.h"
#include "meshtrain/plan/machine_profile.h"
#include "meshtrain/plan/rank_replay.h"
#include "meshtrain/plan/step_time.h"
#include "meshtrain/train/device_peak.h"
#include "meshtrain/train/dry_run.h"

namespace meshtrain {

namespace {

struct PlanFlags : RunFlags {
  std::string machine = "h100-sxm";
  std::string machine_file;      // a calibrated profile, in place of --machine
  std::string calibrate;         // measure this machine into this file first
  int threads = 0;               // CPU threads per rank while calibrating (0: the CPUs per rank)
  int devices_per_node = 0;      // 0: the machine's
  double device_memory_gib = 0;  // 0: the machine's
  bool json = false;
};

// What the plan predicts beyond the replays, and on what.
struct Prediction {
  MachineProfile machine;
  StepTimePrediction time;
  double tokens_per_s = 0;  // all ranks together
  double mfu = 0;           // model FLOPs per second over the ranks' dense peak
};

Prediction predict(const TrainConfig& config, const PlanLayout& layout, const Workload& workload,
                   const std::vector<ReplayedRank>& ranks, MachineProfile machine) {
  Prediction p{.machine = std::move(machine)};
  p.time = predict_step_time(layout, workload, ranks, p.machine);
  const double tokens = static_cast<double>(workload.batch * workload.seq);
  p.tokens_per_s = tokens / p.time.step;
  p.mfu =
      model_flop_utilisation(config.model->training_flops(tokens, workload.seq) / p.time.step,
                             p.machine.dense_peak_flops(compute_dtype(layout)), layout.mesh.size());
  return p;
}

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// The rank whose step peaks highest (the first of equals).
size_t largest_peak(const std::vector<ReplayedRank>& ranks) {
  const auto it = std::max_element(ranks.begin(), ranks.end(), [](const auto& a, const auto& b) {
    return a.memory.total.peak < b.memory.total.peak;
  });
  return static_cast<size_t>(it - ranks.begin());
}

nlohmann::ordered_json rank_time_json(const RankStepTime& time) {
  nlohmann::ordered_json exposed = nlohmann::ordered_json::object();
  for (const auto& [group, seconds] : time.exposed_comm) exposed[group] = seconds;
  return {{"compute", time.compute}, {"exposed_comm", exposed}, {"bubble", time.bubble}};
}

// For scripts: the plan's figures, every rank's, in bytes and seconds.
void print_plan_json(const TrainConfig& config, const PlanLayout& layout,
                     const std::vector<ReplayedRank>& ranks, const Prediction& predicted,
                     std::ostream& out) {
  const double capacity_bytes = predicted.machine.device_memory;
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
                          {"sent", sent},
                          {"time", rank_time_json(predicted.time.ranks[r])}});
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
      {"machine", predicted.machine.name},
      {"largest_peak_rank", largest},
      {"device_memory", capacity_bytes},
      {"fits", static_cast<double>(ranks[largest].memory.total.peak) <= capacity_bytes},
      {"step_seconds", predicted.time.step},
      {"slowest_rank", predicted.time.slowest},
      {"tokens_per_s", predicted.tokens_per_s},
      {"tokens_per_s_per_device", predicted.tokens_per_s / static_cast<double>(ranks.size())},
      {"mfu", predicted.mfu}};
  plan["ranks"] = std::move(ranks_json);
  out << plan.dump(1) << "\n";
}

// "1.234 s", "12.3 ms", "45 us": three figures for steps of any size.
std::string duration(double seconds) {
  char text[32];
  if (seconds >= 1)
    std::snprintf(text, sizeof text, "%.3f s", seconds);
  else if (seconds >= 1e-3)
    std::snprintf(text, sizeof text, "%.3g ms", seconds * 1e3);
  else
    std::snprintf(text, sizeof text, "%.3g us", seconds * 1e6);
  return text;
}

// The predicted step of the slowest rank, its terms, and the throughput they give.
void print_step_time(const Prediction& p, size_t ranks, std::ostream& out) {
  const RankStepTime& slowest = p.time.ranks[p.time.slowest];
  out << "\nstep time on " << p.machine.name << " (predicted: docs/planner.md): "
      << duration(p.time.step) << "\n";
  std::string exposed;
  for (const auto& [group, seconds] : slowest.exposed_comm)
    if (seconds > 0) exposed += (exposed.empty() ? " (" : ", ") + group + " " + duration(seconds);
  out << "  rank " << p.time.slowest << " (the slowest): compute " << duration(slowest.compute)
      << ", exposed communication " << duration(slowest.total_exposed_comm())
      << (exposed.empty() ? "" : exposed + ")") << ", pipeline bubble "
      << duration(slowest.bubble) << "\n";
  char line[160];
  std::snprintf(line, sizeof line, "  %.0f tokens/s, %.1f per device; MFU %.1f%%\n", p.tokens_per_s,
                p.tokens_per_s / static_cast<double>(ranks), 100 * p.mfu);
  out << line;
}

void print_plan(const TrainConfig& config, const PlanLayout& layout,
                const std::vector<ReplayedRank>& ranks, double seconds, const Prediction& predicted,
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
  for (const ReplayedRank& r : ranks) {
    memory.push_back(r.memory);
    sent.push_back(r.sent);
  }
  print_rank_tables(memory, sent, out);
  const size_t largest = largest_peak(ranks);
  const double peak = static_cast<double>(ranks[largest].memory.total.peak);
  std::snprintf(line, sizeof line, "%s: rank %zu peaks at %.1f GiB, %s %.1f GiB per device\n",
                peak <= capacity_bytes ? "fits" : "does not fit", largest, peak / kGiB,
                peak <= capacity_bytes ? "within" : "over", capacity_bytes / kGiB);
  out << "\n" << line;
  print_step_time(predicted, ranks.size(), out);
}

// The profile the plan predicts on: measured now (--calibrate, saying so on `log`), read
// (--machine-file), or a preset.
MachineProfile machine_of(const PlanFlags& f, std::ostream& log) {
  MT_CHECK(f.calibrate.empty() || f.machine_file.empty(),
           "--calibrate writes a profile and plans with it; give it or --machine-file, not both");
  if (!f.machine_file.empty())
    return parse_machine_profile(read_small_file(f.machine_file), f.machine_file);
  if (f.calibrate.empty()) return machine_preset(f.machine);
  check_regular_output(f.calibrate, "--calibrate");
  const int world = std::max(2, f.config.world);
  const CalibrationOptions options{
      .ranks = world,
      .threads_per_rank =
          f.threads > 0 ? f.threads : std::max(1, ops::cpu::available_cpus() / world)};
  log << "calibrating: kernels of single-rank steps with " << options.threads_per_rank
      << " thread(s), all-gathers over " << options.ranks << " local ranks ..." << std::endl;
  const MachineProfile measured = calibrate_this_machine(options);
  AtomicFile file(f.calibrate);  // whole or not at all
  write_file_synced(file.partial_path(), machine_profile_json(measured));
  file.commit();
  log << "wrote " << f.calibrate << ": " << measured.kernels.size()
      << " kernels fitted; collectives " << duration(measured.intra_node_latency) << " + "
      << measured.intra_node_bandwidth / 1e9 << " GB/s\n\n";
  return measured;
}

}  // namespace

void add_plan_command(CLI::App& app, const Registries& registries) {
  auto* cmd = app.add_subcommand(
      "plan",
      "Predict a layout's memory per rank by category, bytes sent per mesh axis and step time, "
      "for any world size, in a second, by replaying each rank's step alone on shape-only "
      "tensors (docs/planner.md)");
  auto f = std::make_shared<PlanFlags>();
  add_model_choice_flags(cmd, f, registries.models);
  add_workload_flags(cmd, f);
  add_layout_flags(cmd, f, registries);
  std::string presets;
  for (const std::string& name : machine_preset_names())
    presets += (presets.empty() ? "" : ", ") + name;
  cmd->add_option("--machine", f->machine,
                  "the devices the step time is predicted on: " + presets +
                      " (published figures and stated efficiencies; cpu: this machine's cores "
                      "on the local backend, measured; docs/planner.md)")
      ->capture_default_str();
  cmd->add_option("--machine-file", f->machine_file,
                  "a machine profile (JSON) that --calibrate wrote, in place of --machine");
  cmd->add_option("--calibrate", f->calibrate,
                  "first measure this machine's kernels (single-rank steps of a few shapes) and "
                  "the local backend's collectives, write the profile to this file, and plan "
                  "with it");
  cmd->add_option("--threads", f->threads,
                  "CPU threads per rank while calibrating (default: this machine's CPUs split "
                  "among --world ranks)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--gpus-per-node", f->devices_per_node,
                  "devices per node, ranks numbered tp fastest (default: the machine's)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--device-memory", f->device_memory_gib,
                  "GiB each device holds, to say whether the largest peak fits (default: the "
                  "machine's)")
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
    // Under --json, stdout holds the JSON alone.
    MachineProfile machine = machine_of(*f, f->json ? std::cerr : std::cout);
    if (f->devices_per_node > 0) machine.devices_per_node = f->devices_per_node;
    if (f->device_memory_gib > 0) machine.device_memory = f->device_memory_gib * kGiB;
    const Prediction predicted = predict(c, layout, plan_workload(c), ranks, machine);
    if (f->json)
      print_plan_json(c, layout, ranks, predicted, std::cout);
    else
      print_plan(c, layout, ranks, seconds, predicted, std::cout);
  });
}

}  // namespace meshtrain
