#include "meshtrain/cli/machine_flags.h"

#include <algorithm>
#include <cstdio>
#include <ostream>

#include "meshtrain/checkpoint/durable_files.h"
#include "meshtrain/core/error.h"
#include "meshtrain/core/memory.h"
#include "meshtrain/plan/calibrate.h"

namespace meshtrain {

void add_machine_flags(CLI::App* cmd, const std::shared_ptr<MachineFlags>& f,
                       const std::string& preset) {
  f->machine = preset;
  std::string presets;
  for (const std::string& name : machine_preset_names())
    presets += (presets.empty() ? "" : ", ") + name;
  cmd->add_option("--machine", f->machine,
                  "the devices the step time is predicted on: " + presets +
                      " (published figures and stated efficiencies; cpu: this machine's cores "
                      "on the local backend; docs/planner.md)")
      ->capture_default_str();
  cmd->add_option("--machine-file", f->machine_file,
                  "a machine profile (JSON) that --calibrate wrote, in place of --machine");
  cmd->add_option("--calibrate", f->calibrate,
                  "measure this machine's kernels (single-rank steps of a few shapes) and the "
                  "local backend's collectives (sweep: a round of the calibration before each of "
                  "its rounds), write the profile to this file, and predict with it");
  cmd->add_option("--gpus-per-node", f->devices_per_node,
                  "devices per node, ranks numbered tp fastest (default: the machine's)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--device-memory", f->device_memory_gib,
                  "GiB each device holds, to say whether the largest peak fits (default: the "
                  "machine's)")
      ->check(CLI::PositiveNumber);
  const auto figure = [&](const std::string& flag, double& value, const std::string& what) {
    cmd->add_option(flag, value, what + " (default: the machine's)")->check(CLI::PositiveNumber);
  };
  figure("--peak-tflops-f32", f->peak_tflops_f32, "dense f32 TFLOP/s of a device, MFU's peak");
  figure("--peak-tflops-bf16", f->peak_tflops_bf16, "dense bf16 TFLOP/s of a device, MFU's peak");
  figure("--intra-node-bandwidth", f->intra_node_gbps,
         "GB/s a device sends at in a collective within a node (in place of a calibrated "
         "profile's fits per collective)");
  figure("--inter-node-bandwidth", f->inter_node_gbps,
         "GB/s a device sends at in a collective across nodes");
  figure("--intra-node-latency", f->intra_node_latency_us,
         "microseconds per collective call within a node (in place of a calibrated profile's fits "
         "per collective)");
  figure("--inter-node-latency", f->inter_node_latency_us,
         "microseconds per collective call across nodes");
}

namespace {

void check_one_source(const MachineFlags& f) {
  MT_CHECK(f.calibrate.empty() || f.machine_file.empty(),
           "--calibrate writes a profile and predicts with it; give it or --machine-file, not "
           "both");
}

MachineProfile with_overrides(const MachineFlags& f, MachineProfile profile) {
  if (f.devices_per_node > 0) profile.devices_per_node = f.devices_per_node;
  if (f.device_memory_gib > 0) profile.device_memory = f.device_memory_gib * kGiB;
  if (f.peak_tflops_f32 > 0) profile.dense_peak_flops_f32 = f.peak_tflops_f32 * 1e12;
  if (f.peak_tflops_bf16 > 0) profile.dense_peak_flops_bf16 = f.peak_tflops_bf16 * 1e12;
  if (f.inter_node_gbps > 0) profile.inter_node_bandwidth = f.inter_node_gbps * 1e9;
  if (f.inter_node_latency_us > 0) profile.inter_node_latency = f.inter_node_latency_us * 1e-6;
  if (f.intra_node_gbps > 0 || f.intra_node_latency_us > 0) {
    // The link's figures stand for every collective within a node, a calibrated profile's fits
    // per collective included, or the flag would not reach them.
    profile.collectives.clear();
    if (f.intra_node_gbps > 0) profile.intra_node_bandwidth = f.intra_node_gbps * 1e9;
    if (f.intra_node_latency_us > 0) profile.intra_node_latency = f.intra_node_latency_us * 1e-6;
  }
  return profile;
}

}  // namespace

CalibrationOptions start_calibration(const MachineFlags& f, int ranks, int threads_per_rank,
                                     std::ostream& log) {
  check_one_source(f);
  MT_CHECK(!f.calibrate.empty(), "start_calibration without --calibrate");
  check_regular_output(f.calibrate, "--calibrate");
  // The collectives over the run's ranks (up to 8), however many cores there are: ranks that
  // outnumber the cores wait on each other in every collective, and a run's do too.
  const CalibrationOptions options{.ranks = std::clamp(ranks, 2, 8),
                                   .threads_per_rank = threads_per_rank};
  log << "calibrating: kernels of single-rank steps with " << options.threads_per_rank
      << " thread(s), collectives over " << options.ranks << " local ranks ..." << std::endl;
  return options;
}

MachineProfile finish_calibration(const MachineFlags& f, const MachineProfile& measured,
                                  std::ostream& log) {
  write_file_atomically(f.calibrate, machine_profile_json(measured));
  log << "wrote " << f.calibrate << ": " << measured.kernels.size()
      << " kernels fitted; collectives (latency + bandwidth by group size):";
  for (const auto& [kind, by_size] : measured.collectives) {
    log << "\n  " << comm_op_name(kind);
    const char* separator = " ";
    for (const auto& [group_size, fit] : by_size) {
      log << separator << group_size << ": " << duration_text(fit.per_call) << " + "
          << 1e-9 / fit.per_unit << " GB/s";
      separator = ", ";
    }
  }
  log << "\n\n";
  return with_overrides(f, measured);
}

MachineProfile machine_of(const MachineFlags& f, int ranks, int threads_per_rank,
                          std::ostream& log) {
  if (!f.calibrate.empty())
    return finish_calibration(
        f, calibrate_this_machine(start_calibration(f, ranks, threads_per_rank, log)), log);
  return with_overrides(
      f, f.machine_file.empty()
             ? machine_preset(f.machine)
             : parse_machine_profile(read_small_file(f.machine_file), f.machine_file));
}

std::string duration_text(double seconds) {
  char text[32];
  if (seconds >= 1)
    std::snprintf(text, sizeof text, "%.3f s", seconds);
  else if (seconds >= 1e-3)
    std::snprintf(text, sizeof text, "%.1f ms", seconds * 1e3);
  else
    std::snprintf(text, sizeof text, "%.1f us", seconds * 1e6);
  return text;
}

}  // namespace meshtrain
