#include "meshtrain/core/ops/op_counts.h"

namespace meshtrain::ops {

namespace {
thread_local OpCounts* bound_counts = nullptr;
}  // namespace

OpWork& OpWork::operator+=(const OpWork& other) {
  calls += other.calls;
  flops += other.flops;
  bytes += other.bytes;
  return *this;
}

void OpCounts::add(std::string_view op, double flops, double bytes) {
  auto it = by_op_.find(op);
  if (it == by_op_.end()) it = by_op_.emplace(std::string(op), OpWork{}).first;
  it->second += OpWork{.calls = 1, .flops = flops, .bytes = bytes};
}

OpWork OpCounts::total() const {
  OpWork sum;
  for (const auto& [op, work] : by_op_) sum += work;
  return sum;
}

OpCounts* current_op_counts() { return bound_counts; }

OpCountScope::OpCountScope(OpCounts* counts) : previous_(bound_counts) { bound_counts = counts; }
OpCountScope::~OpCountScope() { bound_counts = previous_; }

}  // namespace meshtrain::ops
