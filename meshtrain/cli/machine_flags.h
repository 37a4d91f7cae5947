// The flags that say which machine a prediction is for, which `meshtrain plan` and
// `meshtrain sweep` share: a preset (--machine), a profile file (--machine-file), or this machine
// measured now into a file (--calibrate), with flags overriding the profile's figures: devices
// per node, memory, dense peaks per dtype, and the links' bandwidth and latency.
#pragma once

#include <CLI/CLI.hpp>
#include <iosfwd>
#include <memory>
#include <string>

#include "meshtrain/plan/calibrate.h"
#include "meshtrain/plan/machine_profile.h"

namespace meshtrain {

struct MachineFlags {
  std::string machine;       // a preset
  std::string machine_file;  // a profile, in place of the preset
  std::string calibrate;     // measure this machine into this file first
  // Overrides; 0: the profile's.
  int devices_per_node = 0;
  double device_memory_gib = 0;
  double peak_tflops_f32 = 0, peak_tflops_bf16 = 0;
  double intra_node_gbps = 0, inter_node_gbps = 0;              // GB/s a device sends at
  double intra_node_latency_us = 0, inter_node_latency_us = 0;  // per collective call
};

// --machine (default `preset`), --machine-file, --calibrate, and the overrides: --gpus-per-node,
// --device-memory, --peak-tflops-f32, --peak-tflops-bf16, --intra-node-bandwidth,
// --inter-node-bandwidth, --intra-node-latency, --inter-node-latency.
void add_machine_flags(CLI::App* cmd, const std::shared_ptr<MachineFlags>& f,
                       const std::string& preset);

// The profile the flags name. Calibrating measures this machine with `threads_per_rank` threads
// per rank and collectives over `ranks` local ranks (clamped to 2 .. 8, whatever the CPUs),
// saying so on `log`, and writes the profile to its file atomically.
MachineProfile machine_of(const MachineFlags& f, int ranks, int threads_per_rank,
                          std::ostream& log);

// machine_of's calibration taken in two parts, for a caller that spreads its rounds among its
// own (meshtrain sweep): the options, once the flags and the output file are checked and `log`
// told; then the measured profile written to --calibrate's file, `log` told its collectives, and
// returned with the flags' overrides.
CalibrationOptions start_calibration(const MachineFlags& f, int ranks, int threads_per_rank,
                                     std::ostream& log);
MachineProfile finish_calibration(const MachineFlags& f, const MachineProfile& measured,
                                  std::ostream& log);

// "1.234 s", "12.3 ms", "45.6 us": a duration of any size in its unit.
std::string duration_text(double seconds);

}  // namespace meshtrain
