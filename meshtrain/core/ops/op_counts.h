// Counting the kernels' work: a thread binds an OpCounts (OpCountScope, as MemoryScope binds a
// memory tracker) and every kernel it calls adds one call, its arithmetic and the bytes of its
// arguments under its op's name, on any device, shape-only (meta) tensors included: the planner
// counts a rank's step without computing it (meshtrain/plan/rank_replay.h), and a real step
// counts the same. Counting off costs a thread-local load and a branch per kernel.
//
// FLOPs are the kernels' multiply-adds (2 each) in their matrix products, as the CPU kernels
// compute them: matmul 2MNK, a linear layer 2 N in out forward and as much for each gradient it
// forms, attention the full T x T products of each head (4 T^2 hd forward; backward recomputes the
// probabilities: 10 T^2 hd). Everything else (norms, activations, softmax, the loss, AdamW) counts
// its bytes only. Bytes are every tensor argument's, once per argument: the traffic a kernel
// that reads or writes each once makes (a kernel's own scratch is not counted).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace meshtrain::ops {

struct OpWork {
  int64_t calls = 0;
  double flops = 0.0;
  double bytes = 0.0;

  OpWork& operator+=(const OpWork& other);
};

class OpCounts {
 public:
  void add(std::string_view op, double flops, double bytes);
  // Per op name, in name order.
  const std::map<std::string, OpWork, std::less<>>& by_op() const { return by_op_; }
  OpWork total() const;
  void clear() { by_op_.clear(); }

 private:
  std::map<std::string, OpWork, std::less<>> by_op_;
};

// The counts bound to this thread, or null.
OpCounts* current_op_counts();

// Binds counts to the current thread for the scope's lifetime (restores the previous ones).
class OpCountScope {
 public:
  explicit OpCountScope(OpCounts* counts);
  ~OpCountScope();
  OpCountScope(const OpCountScope&) = delete;
  OpCountScope& operator=(const OpCountScope&) = delete;

 private:
  OpCounts* previous_;
};

}  // namespace meshtrain::ops
