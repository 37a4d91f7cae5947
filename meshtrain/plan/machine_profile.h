// MachineProfile: what the planner's step-time model (step_time.h) knows of the machine a layout
// runs on, per device (a GPU, or a rank of the CPU backend): the dense peak of its matrix products
// per dtype (MFU's denominator) and the share of it that the kernels' GEMMs reach, the memory
// bandwidth of the kernels that only move bytes, and the bandwidth and latency of a collective
// within a node and across nodes.
//
// The presets are published figures with stated efficiency assumptions, not measurements of this
// project's kernels on those devices (nothing has run on one yet: docs/gpu.md):
//   h100-sxm  989 TFLOP/s bf16, 67 f32 (no TF32); 3.35 TB/s HBM3; NVLink 4 at 450 GB/s a direction;
//             400 Gb/s InfiniBand per GPU; 8 per node; 80 GiB
//   h200      the H100 SXM's compute and links; 4.8 TB/s HBM3e; 141 GB (143771 MiB)
//   a100-80g  312 TFLOP/s bf16, 19.5 f32; 2.04 TB/s; NVLink 3 at 300 GB/s; 200 Gb/s per GPU; 80 GiB
// each assuming GEMMs at 60% of the dense peak, 80% of the memory bandwidth, collectives at 80% of
// the link (NCCL's bus bandwidth on a ring) and 10 us (in a node) or 20 us (across) per call,
// collectives fully overlapping compute (their own stream);
//   cpu       one core of this machine per rank on the local backend, measured in
//             docs/benchmarks.md (2026-12): f32 GEMMs at 90 GFLOP/s and bf16 at 170 (their GEMM
//             libraries' own peak: efficiency 1), 13.4 GB/s memcpy, collectives at 4.7 GB/s bus
//             bandwidth, 50 us per call, one node, no overlap of collectives and compute, and
//             this machine's 24 GiB.
// A calibrated profile (meshtrain plan --calibrate FILE, calibrate.h) measures this machine
// instead; --machine-file reads it.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "meshtrain/core/comm/types.h"
#include "meshtrain/core/dtype.h"

namespace meshtrain {

// One kernel's measured cost (calibrate.h): per call, and per unit of its work (a FLOP, or a
// byte for a kernel without products).
struct KernelFit {
  double per_call = 0;  // seconds
  double per_unit = 0;  // seconds
};

struct MachineProfile {
  std::string name;
  double dense_peak_flops_f32 = 0;   // FLOP/s per device
  double dense_peak_flops_bf16 = 0;  // FLOP/s per device
  double gemm_efficiency = 1;        // the share of the dense peak the GEMMs reach
  double memory_bandwidth = 0;       // bytes/s per device, as kernels reach it
  double intra_node_bandwidth = 0;   // bytes/s a device sends at in a collective within a node
  double inter_node_bandwidth = 0;   // ... in a collective that crosses nodes
  double intra_node_latency = 0;     // seconds per collective call within a node
  double inter_node_latency = 0;     // ... across nodes
  int devices_per_node = 1;
  double device_memory = 0;  // bytes
  // The share of the data axes' communication that compute can hide: 1 where collectives run
  // beside the kernels (NCCL on its own stream), 0 where they take the kernels' cores (the local
  // backend with a core per rank).
  double comm_overlap = 1;
  // CPU cores the ranks of a node share, each with threads_per_rank threads: threads needing more
  // than the cores' capacity (cores x shared_core_efficiency) make the ranks wait for them
  // (step_time.h). 0: each device computes on its own (GPUs).
  int cores = 0;
  int threads_per_rank = 1;
  // The share of those cores the ranks' kernels get once their threads fill them (the rest goes to
  // the collectives' copies, the scheduler's tails where the ranks meet, its switches): a
  // calibrated profile measures it on a real multi-rank step; 1 elsewhere.
  double shared_core_efficiency = 1;
  // Measured kernels by op name (a calibrated profile), in place of the roofline.
  std::map<std::string, KernelFit, std::less<>> kernels{};
  // Seconds of the host's work per kernel call outside the kernels (dispatch, allocation, the
  // runner's bookkeeping): a calibrated profile's; 0 in the presets, whose host runs ahead of the
  // device.
  double host_per_call = 0;
  // Measured collectives by kind and group size (a calibrated profile): the latency of a call
  // (per_call) and the seconds per byte sent (per_unit), in place of the intra-node link's figures
  // for a group within a node. A group of another size takes the largest measured size of its
  // kind below its own, or, below every measured size, the smallest; a kind not measured, the
  // link's figures.
  std::map<CommOp, std::map<int, KernelFit>> collectives{};

  double dense_peak_flops(DType dtype) const;  // InvalidArgument for a dtype without one
  double gemm_flops(DType dtype) const;        // dense_peak_flops x gemm_efficiency
  // InvalidArgument naming the first figure that is not positive (and finite).
  void check() const;
};

// A profile as JSON text (every figure, the kernel fits by op), and back. InvalidArgument naming
// `origin` and the field for text that is not one.
std::string machine_profile_json(const MachineProfile& profile);
MachineProfile parse_machine_profile(const std::string& json, const std::string& origin);

// "h100-sxm", "h200", "a100-80g", "cpu"; InvalidArgument listing them for another name.
MachineProfile machine_preset(std::string_view name);
std::vector<std::string> machine_preset_names();

}  // namespace meshtrain
