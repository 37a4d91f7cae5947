#include "meshtrain/core/ops/op_counts.h"

#include <utility>

namespace meshtrain::ops {

namespace {
thread_local OpCounts* bound_counts = nullptr;
thread_local const std::string* current_section = nullptr;

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

void OpCounts::add(std::string_view op, double flops, double bytes) {
  const std::string_view section = current_section ? *current_section : std::string_view();
  auto in = sections_.find(section);
  if (in == sections_.end()) in = sections_.emplace(std::string(section), ByOp{}).first;
  auto it = in->second.find(op);
  if (it == in->second.end()) it = in->second.emplace(std::string(op), OpWork{}).first;
  it->second += OpWork{.calls = 1, .flops = flops, .bytes = bytes};
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

OpCountScope::OpCountScope(OpCounts* counts) : previous_(bound_counts) { bound_counts = counts; }
OpCountScope::~OpCountScope() { bound_counts = previous_; }

OpCountSection::OpCountSection(std::string name)
    : name_(std::move(name)), previous_(current_section) {
  current_section = &name_;
}
OpCountSection::~OpCountSection() { current_section = previous_; }

}  // namespace meshtrain::ops
