#include "meshtrain/core/ops/op_counts.h"

#include <utility>

namespace meshtrain::ops {

namespace {
thread_local OpCounts* bound_counts = nullptr;
thread_local const std::string* current_section = nullptr;
// The bound counts' map for the current section, once a kernel has counted into it: a run of
// kernels in one section looks the section up once (a replay counts a few hundred thousand).
// Reset whenever the binding or the section changes, and when the bound counts are cleared.
thread_local OpCounts::ByOp* bound_section_ops = nullptr;

OpWork sum(const OpCounts::ByOp& by_op) {
  OpWork total;
  for (const auto& [op, work] : by_op) total += work;
  return total;
}
}  // namespace

OpWork& OpWork::operator+=(const OpWork& other) {
  calls += other.calls;
  flops += other.flops;
  bytes += other.bytes;
  return *this;
}

OpCounts::ByOp& OpCounts::current_section_ops() {
  const bool bound = this == bound_counts;
  if (bound && bound_section_ops) return *bound_section_ops;
  const std::string_view section = current_section ? *current_section : std::string_view();
  auto in = sections_.find(section);
  if (in == sections_.end()) in = sections_.emplace(std::string(section), ByOp{}).first;
  if (bound) bound_section_ops = &in->second;  // map nodes stay put as others are added
  return in->second;
}

void OpCounts::add(std::string_view op, double flops, double bytes) {
  ByOp& by_op = current_section_ops();
  auto it = by_op.find(op);
  if (it == by_op.end()) it = by_op.emplace(std::string(op), OpWork{}).first;
  it->second += OpWork{.calls = 1, .flops = flops, .bytes = bytes};
}

void OpCounts::clear() {
  if (this == bound_counts) bound_section_ops = nullptr;
  sections_.clear();
}

OpCounts::ByOp OpCounts::by_op() const {
  ByOp merged;
  for (const auto& [section, by_op] : sections_)
    for (const auto& [op, work] : by_op) merged[op] += work;
  return merged;
}

OpWork OpCounts::section_total(std::string_view section) const {
  const auto it = sections_.find(section);
  return it == sections_.end() ? OpWork{} : sum(it->second);
}

OpWork OpCounts::total() const {
  OpWork all;
  for (const auto& [section, by_op] : sections_) all += sum(by_op);
  return all;
}

OpCounts* current_op_counts() { return bound_counts; }

OpCountScope::OpCountScope(OpCounts* counts) : previous_(bound_counts) {
  bound_counts = counts;
  bound_section_ops = nullptr;
}
OpCountScope::~OpCountScope() {
  bound_counts = previous_;
  bound_section_ops = nullptr;
}

OpCountSection::OpCountSection(std::string name)
    : name_(std::move(name)), previous_(current_section) {
  current_section = &name_;
  bound_section_ops = nullptr;
}
OpCountSection::~OpCountSection() {
  current_section = previous_;
  bound_section_ops = nullptr;
}

}  // namespace meshtrain::ops
