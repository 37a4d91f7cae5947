#include "meshtrain/plan/machine_profile.h"

#include <cmath>

#include "meshtrain/core/error.h"

namespace meshtrain {

namespace {

constexpr double kGB = 1e9;
constexpr double kUs = 1e-6;

// A GPU preset from its published figures and the efficiency assumptions of the header.
MachineProfile gpu(std::string name, double bf16, double f32, double hbm, double nvlink,
                   double network, double memory) {
  return {.name = std::move(name),
          .dense_peak_flops_f32 = f32,
          .dense_peak_flops_bf16 = bf16,
          .gemm_efficiency = 0.6,
          .memory_bandwidth = 0.8 * hbm,
          .intra_node_bandwidth = 0.8 * nvlink,
          .inter_node_bandwidth = 0.8 * network,
          .intra_node_latency = 10 * kUs,
          .inter_node_latency = 20 * kUs,
          .devices_per_node = 8,
          .device_memory = memory};
}

std::vector<MachineProfile> presets() {
  return {
      gpu("h100-sxm", 989.4e12, 66.9e12, 3350 * kGB, 450 * kGB, 50 * kGB, 80 * kGB),
      gpu("h200", 989.4e12, 66.9e12, 4800 * kGB, 450 * kGB, 50 * kGB, 141 * kGB),
      gpu("a100-80g", 312e12, 19.5e12, 2039 * kGB, 300 * kGB, 25 * kGB, 80 * kGB),
      {.name = "cpu",
       .dense_peak_flops_f32 = 90e9,
       .dense_peak_flops_bf16 = 170e9,
       .gemm_efficiency = 1,
       .memory_bandwidth = 13.4 * kGB,
       .intra_node_bandwidth = 4.7 * kGB,
       .inter_node_bandwidth = 4.7 * kGB,
       .intra_node_latency = 50 * kUs,
       .inter_node_latency = 50 * kUs,
       .devices_per_node = 1 << 20,  // every rank in this process
       .device_memory = 24 * kGB},
  };
}

}  // namespace

double MachineProfile::dense_peak_flops(DType dtype) const {
  if (dtype == DType::f32) return dense_peak_flops_f32;
  if (dtype == DType::bf16) return dense_peak_flops_bf16;
  throw InvalidArgument(detail::concat("machine '", name,
                                       "': matrix products run in f32 or bf16, "
                                       "not ",
                                       dtype_name(dtype)));
}

double MachineProfile::gemm_flops(DType dtype) const {
  return dense_peak_flops(dtype) * gemm_efficiency;
}

void MachineProfile::check() const {
  const std::pair<const char*, double> figures[] = {
      {"dense_peak_flops_f32", dense_peak_flops_f32},
      {"dense_peak_flops_bf16", dense_peak_flops_bf16},
      {"gemm_efficiency", gemm_efficiency},
      {"memory_bandwidth", memory_bandwidth},
      {"intra_node_bandwidth", intra_node_bandwidth},
      {"inter_node_bandwidth", inter_node_bandwidth},
      {"devices_per_node", static_cast<double>(devices_per_node)},
      {"device_memory", device_memory}};
  for (const auto& [what, value] : figures)
    MT_CHECK(std::isfinite(value) && value > 0, "machine '", name, "': ", what,
             " must be positive, got ", value);
  for (const auto& [what, value] : {std::pair{"intra_node_latency", intra_node_latency},
                                    std::pair{"inter_node_latency", inter_node_latency}})
    MT_CHECK(std::isfinite(value) && value >= 0, "machine '", name, "': ", what,
             " must be non-negative, got ", value);
  MT_CHECK(gemm_efficiency <= 1, "machine '", name, "': gemm_efficiency is a share of the peak, ",
           "at most 1, got ", gemm_efficiency);
}

MachineProfile machine_preset(std::string_view name) {
  for (MachineProfile& preset : presets())
    if (preset.name == name) return preset;
  std::string known;
  for (const std::string& n : machine_preset_names()) known += (known.empty() ? "" : ", ") + n;
  throw InvalidArgument(detail::concat("unknown machine '", name, "'; the presets are ", known));
}

std::vector<std::string> machine_preset_names() {
  std::vector<std::string> names;
  for (const MachineProfile& preset : presets()) names.push_back(preset.name);
  return names;
}

}  // namespace meshtrain
