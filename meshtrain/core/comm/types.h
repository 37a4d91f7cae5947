// Vocabulary of the communication layer: reduction ops, op kinds, per-op byte counters, options.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace meshtrain {

enum class ReduceOp { sum, avg, max };
std::string_view reduce_op_name(ReduceOp op);

enum class CommOp { all_gather, reduce_scatter, all_reduce, broadcast, send, recv, all_to_all, barrier };
inline constexpr size_t kNumCommOps = 8;
std::string_view comm_op_name(CommOp op);
std::optional<CommOp> comm_op_named(std::string_view name);  // comm_op_name's inverse

// Bytes a rank sends and receives per op kind, counted as the bandwidth-optimal (ring) algorithm
// moves them, whatever the backend does internally: for a buffer of S bytes at world size W,
// all-gather and reduce-scatter move (W-1)/W * S_full each way, all-reduce 2(W-1)/W * S, all-to-all
// (W-1)/W * S, broadcast S (the root sends, the others receive), send/recv S, barrier 0.
// These are the nccl-tests "bus bandwidth" volumes, so the ZeRO formulas can be checked exactly.
struct CommCounters {
  std::array<uint64_t, kNumCommOps> bytes_sent{};
  std::array<uint64_t, kNumCommOps> bytes_received{};
  std::array<uint64_t, kNumCommOps> calls{};

  uint64_t sent(CommOp op) const { return bytes_sent[static_cast<size_t>(op)]; }
  uint64_t received(CommOp op) const { return bytes_received[static_cast<size_t>(op)]; }
  uint64_t count(CommOp op) const { return calls[static_cast<size_t>(op)]; }
  uint64_t total_sent() const;
  uint64_t total_received() const;
  CommCounters& operator+=(const CommCounters& other);
  CommCounters& operator-=(const CommCounters& other);  // what was counted since `other`
};

struct CommOptions {
  // Default for Work::wait() and every internal wait of a backend: a hang is a bug.
  std::chrono::milliseconds timeout{std::chrono::seconds(120)};
};

}  // namespace meshtrain
