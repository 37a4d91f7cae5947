#include "meshtrain/plan/machine_profile.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "meshtrain/core/error.h"
#include "meshtrain/core/memory.h"
#include "meshtrain/core/parse_integer.h"

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
      gpu("h100-sxm", 989.4e12, 66.9e12, 3350 * kGB, 450 * kGB, 50 * kGB, 80 * kGiB),
      gpu("h200", 989.4e12, 66.9e12, 4800 * kGB, 450 * kGB, 50 * kGB, 143771.0 * 1024 * 1024),
      gpu("a100-80g", 312e12, 19.5e12, 2039 * kGB, 300 * kGB, 25 * kGB, 80 * kGiB),
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
       .device_memory = 24 * kGiB,
       .comm_overlap = 0},
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
                                    std::pair{"inter_node_latency", inter_node_latency},
                                    std::pair{"host_per_call", host_per_call}})
    MT_CHECK(std::isfinite(value) && value >= 0, "machine '", name, "': ", what,
             " must be non-negative, got ", value);
  MT_CHECK(gemm_efficiency <= 1, "machine '", name, "': gemm_efficiency is a share of the peak, ",
           "at most 1, got ", gemm_efficiency);
  MT_CHECK(comm_overlap >= 0 && comm_overlap <= 1, "machine '", name,
           "': comm_overlap is a share, from 0 to 1, got ", comm_overlap);
  MT_CHECK(shared_core_efficiency > 0 && shared_core_efficiency <= 1, "machine '", name,
           "': shared_core_efficiency is a share, above 0 and at most 1, got ",
           shared_core_efficiency);
  for (const auto& [op, fit] : kernels)
    MT_CHECK(std::isfinite(fit.per_call) && fit.per_call >= 0 && std::isfinite(fit.per_unit) &&
                 fit.per_unit >= 0,
             "machine '", name, "': the fit of kernel '", op,
             "' must be non-negative, got per_call ", fit.per_call, ", per_unit ", fit.per_unit);
  for (const auto& [op, by_size] : collectives)
    for (const auto& [group_size, fit] : by_size)
      MT_CHECK(group_size >= 2 && std::isfinite(fit.per_call) && fit.per_call >= 0 &&
                   std::isfinite(fit.per_unit) && fit.per_unit >= 0,
               "machine '", name, "': the ", comm_op_name(op), " fit of groups of ", group_size,
               " must be non-negative, of groups of at least 2, got per_call ", fit.per_call,
               ", per_unit ", fit.per_unit);
}

std::string machine_profile_json(const MachineProfile& p) {
  nlohmann::ordered_json kernels = nlohmann::ordered_json::object();
  for (const auto& [op, fit] : p.kernels)
    kernels[op] = {{"per_call", fit.per_call}, {"per_unit", fit.per_unit}};
  nlohmann::ordered_json collectives = nlohmann::ordered_json::object();
  for (const auto& [op, by_size] : p.collectives) {
    nlohmann::ordered_json sizes = nlohmann::ordered_json::object();
    for (const auto& [group_size, fit] : by_size)
      sizes[std::to_string(group_size)] = {{"per_call", fit.per_call}, {"per_unit", fit.per_unit}};
    collectives[std::string(comm_op_name(op))] = sizes;
  }
  const nlohmann::ordered_json json = {{"name", p.name},
                                       {"dense_peak_flops_f32", p.dense_peak_flops_f32},
                                       {"dense_peak_flops_bf16", p.dense_peak_flops_bf16},
                                       {"gemm_efficiency", p.gemm_efficiency},
                                       {"memory_bandwidth", p.memory_bandwidth},
                                       {"intra_node_bandwidth", p.intra_node_bandwidth},
                                       {"inter_node_bandwidth", p.inter_node_bandwidth},
                                       {"intra_node_latency", p.intra_node_latency},
                                       {"inter_node_latency", p.inter_node_latency},
                                       {"devices_per_node", p.devices_per_node},
                                       {"device_memory", p.device_memory},
                                       {"comm_overlap", p.comm_overlap},
                                       {"cores", p.cores},
                                       {"threads_per_rank", p.threads_per_rank},
                                       {"kernels", kernels},
                                       {"host_per_call", p.host_per_call},
                                       {"shared_core_efficiency", p.shared_core_efficiency},
                                       {"collectives", collectives}};
  return json.dump(1) + "\n";
}

MachineProfile parse_machine_profile(const std::string& text, const std::string& origin) {
  const nlohmann::json json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  MT_CHECK(json.is_object(), origin,
           ": a machine profile is a JSON object (meshtrain plan "
           "--calibrate writes one)");
  const auto field = [&](const char* key) -> const nlohmann::json& {
    const auto it = json.find(key);
    MT_CHECK(it != json.end(), origin, ": the machine profile has no '", key, "'");
    return *it;
  };
  const auto number = [&](const char* key) {
    const nlohmann::json& value = field(key);
    MT_CHECK(value.is_number(), origin, ": '", key, "' must be a number, got ", value.dump());
    return value.get<double>();
  };
  const auto whole = [&](const char* key, int least) {
    const double value = number(key);
    MT_CHECK(value >= least && value <= (1 << 30) && value == std::floor(value), origin, ": '", key,
             "' must be a whole number >= ", least, ", got ", value);
    return static_cast<int>(value);
  };
  MachineProfile p;
  MT_CHECK(field("name").is_string(), origin, ": 'name' must be a string");
  p.name = field("name").get<std::string>();
  p.dense_peak_flops_f32 = number("dense_peak_flops_f32");
  p.dense_peak_flops_bf16 = number("dense_peak_flops_bf16");
  p.gemm_efficiency = number("gemm_efficiency");
  p.memory_bandwidth = number("memory_bandwidth");
  p.intra_node_bandwidth = number("intra_node_bandwidth");
  p.inter_node_bandwidth = number("inter_node_bandwidth");
  p.intra_node_latency = number("intra_node_latency");
  p.inter_node_latency = number("inter_node_latency");
  p.devices_per_node = whole("devices_per_node", 1);
  p.device_memory = number("device_memory");
  p.comm_overlap = number("comm_overlap");
  p.cores = whole("cores", 0);
  p.threads_per_rank = whole("threads_per_rank", 1);
  const auto fit_of = [&](const std::string& what, const nlohmann::json& fit) {
    MT_CHECK(fit.is_object() && fit.contains("per_call") && fit.contains("per_unit") &&
                 fit["per_call"].is_number() && fit["per_unit"].is_number(),
             origin, ": ", what, " must be {\"per_call\": s, \"per_unit\": s}, got ", fit.dump());
    return KernelFit{fit["per_call"].get<double>(), fit["per_unit"].get<double>()};
  };
  const nlohmann::json& kernels = field("kernels");
  MT_CHECK(kernels.is_object(), origin, ": 'kernels' must map op names to fits");
  for (const auto& [op, fit] : kernels.items())
    p.kernels[op] = fit_of(detail::concat("kernel '", op, "'"), fit);
  // Optional, as the collectives: profiles calibrated before them have neither.
  if (json.contains("host_per_call")) p.host_per_call = number("host_per_call");
  if (json.contains("shared_core_efficiency"))
    p.shared_core_efficiency = number("shared_core_efficiency");
  if (const auto collectives = json.find("collectives"); collectives != json.end()) {
    MT_CHECK(collectives->is_object(), origin,
             ": 'collectives' must map each kind of collective to its fits by group size, got ",
             collectives->dump());
    for (const auto& [kind, by_size] : collectives->items()) {
      const std::optional<CommOp> op = comm_op_named(kind);
      MT_CHECK(
          op && by_size.is_object(), origin,
          ": 'collectives' maps each kind of collective (all_gather, reduce_scatter, "
          "all_reduce, send, recv, ...) to its fits by group size, got '",
          kind, "': ", by_size.dump(),
          " (a profile calibrated before the fits per kind maps group sizes: calibrate again)");
      for (const auto& [size, fit] : by_size.items()) {
        const std::optional<int> group_size = parse_integer<int>(size);
        MT_CHECK(group_size && *group_size >= 2 && std::to_string(*group_size) == size, origin,
                 ": the ", kind, " fits are keyed by group sizes of at least 2, got '", size, "'");
        p.collectives[*op][*group_size] =
            fit_of(detail::concat("the ", kind, " fit of groups of ", size), fit);
      }
    }
  }
  try {
    p.check();
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(detail::concat(origin, ": ", e.what()));
  }
  return p;
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
