#include "meshtrain/core/comm/types.h"

namespace meshtrain {

std::string_view reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::avg: return "avg";
    case ReduceOp::max: return "max";
  }
  return "unknown";
}

std::string_view comm_op_name(CommOp op) {
  switch (op) {
    case CommOp::all_gather: return "all_gather";
    case CommOp::reduce_scatter: return "reduce_scatter";
    case CommOp::all_reduce: return "all_reduce";
    case CommOp::broadcast: return "broadcast";
    case CommOp::send: return "send";
    case CommOp::recv: return "recv";
    case CommOp::all_to_all: return "all_to_all";
    case CommOp::barrier: return "barrier";
  }
  return "unknown";
}

std::optional<CommOp> comm_op_named(std::string_view name) {
  for (size_t i = 0; i < kNumCommOps; ++i)
    if (comm_op_name(static_cast<CommOp>(i)) == name) return static_cast<CommOp>(i);
  return std::nullopt;
}

uint64_t CommCounters::total_sent() const {
  uint64_t total = 0;
  for (uint64_t b : bytes_sent) total += b;
  return total;
}

uint64_t CommCounters::total_received() const {
  uint64_t total = 0;
  for (uint64_t b : bytes_received) total += b;
  return total;
}

CommCounters& CommCounters::operator+=(const CommCounters& other) {
  for (size_t i = 0; i < kNumCommOps; ++i) {
    bytes_sent[i] += other.bytes_sent[i];
    bytes_received[i] += other.bytes_received[i];
    calls[i] += other.calls[i];
  }
  return *this;
}

CommCounters& CommCounters::operator-=(const CommCounters& other) {
  for (size_t i = 0; i < kNumCommOps; ++i) {
    bytes_sent[i] -= other.bytes_sent[i];
    bytes_received[i] -= other.bytes_received[i];
    calls[i] -= other.calls[i];
  }
  return *this;
}

}  // namespace meshtrain
