#include "meshtrain/cli/layout_search_output.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "meshtrain/cli/machine_flags.h"
#include "meshtrain/core/memory.h"

namespace meshtrain {

namespace {

double gib(uint64_t bytes) { return static_cast<double>(bytes) / kGiB; }

// The memory categories of a rank's step, as the plan's tables show them.
struct MemoryColumns {
  uint64_t params, grads, optimizer, full_params, full_grads, activations, comm, peak;
};

MemoryColumns columns_of(const PlannedLayout& p) {
  const MemoryStats& m = p.peak_memory;
  return {m[MemoryCategory::param].current,       m[MemoryCategory::grad].current,
          m[MemoryCategory::optimizer].current,   m[MemoryCategory::unsharded_param].peak,
          m[MemoryCategory::unsharded_grad].peak, m[MemoryCategory::activation].peak,
          m[MemoryCategory::comm].peak,           p.peak_bytes};
}

std::string padded(const std::string& text, int width) {
  return std::string(static_cast<size_t>(std::max(0, width - static_cast<int>(text.size()))), ' ') +
         text;
}

// A duration, "0" for none.
std::string seconds_text(double seconds) { return seconds > 0 ? duration_text(seconds) : "0"; }

void print_fitting(const SearchReport& r, std::ostream& out) {
  const auto& fitting = r.search.fitting;
  if (fitting.empty()) {
    out << "\nno layout fits " << r.machine.device_memory / kGiB << " GiB per device\n";
    return;
  }
  const size_t shown = std::min(fitting.size(), static_cast<size_t>(r.top));
  out << "\nthe " << shown << " fastest of " << fitting.size()
      << " that fit (predicted: the slowest rank's step, the largest rank's memory in GiB)\n";
  out << "   #  tokens/s/dev    MFU       step    compute  exp. comm     bubble  core wait |   "
         "peak  params"
         "   grads   optim  f.param  f.grad   activ    comm |  mb  layout\n";
  for (size_t i = 0; i < shown; ++i) {
    const PlannedLayout& p = fitting[i];
    const MemoryColumns m = columns_of(p);
    char head[64];
    std::snprintf(head, sizeof head, "%4zu %13.1f %5.1f%% ", i + 1,
                  p.throughput.tokens_per_s / r.space.world, 100 * p.throughput.mfu);
    char memory[160];
    std::snprintf(memory, sizeof memory,
                  " | %6.1f %7.1f %7.1f %7.1f %8.1f %7.1f %7.1f %7.1f | %3d  ", gib(m.peak),
                  gib(m.params), gib(m.grads), gib(m.optimizer), gib(m.full_params),
                  gib(m.full_grads), gib(m.activations), gib(m.comm), p.workload.micro_batches);
    out << head << padded(seconds_text(p.step_seconds), 10)
        << padded(seconds_text(p.slowest.compute), 11)
        << padded(seconds_text(p.slowest.total_exposed_comm()), 11)
        << padded(seconds_text(p.slowest.bubble), 11)
        << padded(seconds_text(p.slowest.cores_wait), 11) << memory << p.layout.to_string() << "\n";
  }
}

void print_not_fitting(const SearchReport& r, std::ostream& out) {
  const auto& not_fitting = r.search.not_fitting;
  if (not_fitting.empty()) return;
  const size_t shown = std::min(not_fitting.size(), static_cast<size_t>(r.top));
  out << "\nthe " << shown << " nearest to fitting of " << not_fitting.size()
      << " that do not (micro-batches, layout: why)\n";
  for (size_t i = 0; i < shown; ++i)
    out << "  " << padded(std::to_string(not_fitting[i].workload.micro_batches), 3) << "  "
        << not_fitting[i].layout.to_string() << ": " << not_fitting[i].does_not_fit << "\n";
}

nlohmann::ordered_json planned_json(const PlannedLayout& p, int world) {
  const MemoryColumns m = columns_of(p);
  nlohmann::ordered_json exposed = nlohmann::ordered_json::object();
  for (const auto& [group, seconds] : p.slowest.exposed_comm) exposed[group] = seconds;
  nlohmann::ordered_json out = {
      {"layout", p.layout.to_string()},
      {"micro_batches", p.workload.micro_batches},
      {"fits", p.fits},
      {"peak_rank", p.peak_rank},
      {"memory",
       {{"params", m.params},
        {"grads", m.grads},
        {"optimizer", m.optimizer},
        {"full_params_peak", m.full_params},
        {"full_grads_peak", m.full_grads},
        {"activations_peak", m.activations},
        {"comm_peak", m.comm},
        {"peak", m.peak}}},
      {"step_seconds", p.step_seconds},
      {"slowest_rank", p.slowest_rank},
      {"time",
       {{"compute", p.slowest.compute},
        {"exposed_comm", exposed},
        {"bubble", p.slowest.bubble},
        {"cores_wait", p.slowest.cores_wait}}},
      {"tokens_per_s", p.throughput.tokens_per_s},
      {"tokens_per_s_per_device", p.throughput.tokens_per_s / world},
      {"mfu", p.throughput.mfu}};
  if (!p.fits) out["does_not_fit"] = p.does_not_fit;
  return out;
}

}  // namespace

void print_layout_search(const SearchReport& r, std::ostream& out) {
  const LayoutSearch& s = r.search;
  char line[200];
  std::snprintf(line, sizeof line, " (%d per node, %.1f GiB each)", r.machine.devices_per_node,
                r.machine.device_memory / kGiB);
  out << "plan: " << r.model.describe() << ", " << r.model.num_parameters() << " parameters, on "
      << r.space.world << " devices of " << r.machine.name << line << ", global batch "
      << r.space.workload.batch << " x " << r.space.workload.seq << " tokens\n";
  std::snprintf(line, sizeof line, "%.2f s", r.seconds);
  out << "  searched in " << line << " (" << s.replays
      << " stage replays; the space: docs/planner.md): " << s.fitting.size() << " layouts fit, "
      << s.not_fitting.size() << " do not, and the run would refuse " << s.refused.size()
      << " (a refusal may cover a mesh's every schedule)\n";
  print_fitting(r, out);
  print_not_fitting(r, out);
  if (!s.refused.empty())
    out << "\nrefused (" << s.refused.size() << "), the first: " << s.refused.front() << "\n";
}

void print_layout_search_json(const SearchReport& r, std::ostream& out) {
  nlohmann::ordered_json fitting = nlohmann::ordered_json::array();
  for (const PlannedLayout& p : r.search.fitting) fitting.push_back(planned_json(p, r.space.world));
  nlohmann::ordered_json not_fitting = nlohmann::ordered_json::array();
  for (const PlannedLayout& p : r.search.not_fitting)
    not_fitting.push_back(planned_json(p, r.space.world));
  const nlohmann::ordered_json json = {
      {"model",
       {{"family", r.model.family()},
        {"describe", r.model.describe()},
        {"parameters", r.model.num_parameters()}}},
      {"machine", r.machine.name},
      {"devices", r.space.world},
      {"devices_per_node", r.machine.devices_per_node},
      {"device_memory", r.machine.device_memory},
      {"workload", {{"batch", r.space.workload.batch}, {"seq", r.space.workload.seq}}},
      {"search_seconds", r.seconds},
      {"stage_replays", r.search.replays},
      {"fitting", fitting},
      {"not_fitting", not_fitting},
      {"refused", r.search.refused}};
  out << json.dump(1) << "\n";
}

}  // namespace meshtrain
