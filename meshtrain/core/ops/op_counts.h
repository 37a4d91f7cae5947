// Counting the kernels' work: a thread binds an OpCounts (OpCountScope, as MemoryScope binds a
// memory tracker) and every kernel it calls adds one call, its arithmetic and the bytes of its
// arguments under its op's name, on any device, shape-only (meta) tensors included: the planner
// counts a rank's step without computing it (meshtrain/plan/rank_replay.h), and a real step's
// forward, backward and AdamW count the same (the trainer's gradient norm and clipping add a few
// kernels without products). Counting off costs a thread-local load and a branch per kernel.
//
// An OpCounts is not synchronised: bind it to one thread at a time (one per rank), and neither
// move nor assign it while bound. The section is the thread's own (OpCountSection), whatever
// counts are bound.
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

// Per section, then per op name. A section is a part of the work that code names while it runs
// (OpCountSection: the pipeline runner names each computation of its schedule "1F3", as
// to_string(Action) does); kernels outside every section count under "".
class OpCounts {
 public:
  using ByOp = std::map<std::string, OpWork, std::less<>>;

  // Into the thread's current section.
  void add(std::string_view op, double flops, double bytes);
  const std::map<std::string, ByOp, std::less<>>& by_section() const { return sections_; }
  // Every section's work together, per op name.
  ByOp by_op() const;
  // One section's (nothing if it counted none).
  OpWork section_total(std::string_view section) const;
  OpWork total() const;
  void clear();

 private:
  ByOp& current_section_ops();

  std::map<std::string, ByOp, std::less<>> sections_;
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

// Names the section this thread's kernels count under for the scope's lifetime (restores the
// previous one).
class OpCountSection {
 public:
  explicit OpCountSection(std::string name);
  ~OpCountSection();
  OpCountSection(const OpCountSection&) = delete;
  OpCountSection& operator=(const OpCountSection&) = delete;

 private:
  std::string name_;
  const std::string* previous_;
};

}  // namespace meshtrain::ops
