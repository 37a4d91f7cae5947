// Placements (as in DTensor): how a tensor lives along one mesh axis.
//   Shard(dim)   each rank of the axis holds one ceil-div chunk of `dim` (see shard_math.h)
//   Shard(dim, blocks)  `dim` is `blocks` equal blocks side by side (GPT-2's packed q|k|v), each
//                block sharded alike; a rank holds its chunk of every block, in block order
//   Replicate()  each rank holds the whole tensor
//   Partial(op)  each rank holds a full-shaped tensor; the true value is their reduction by op
// Written as in DTensor: Placement p = Shard(0); Placement q = Partial(ReduceOp::avg);
#pragma once

#include <string>
#include <variant>

#include "meshtrain/core/comm/types.h"

namespace meshtrain {

struct Replicate {
  bool operator==(const Replicate&) const = default;
};
struct Shard {
  int dim = 0;
  int blocks = 1;  // at least 1
  bool operator==(const Shard&) const = default;
};
struct Partial {
  ReduceOp op = ReduceOp::sum;
  bool operator==(const Partial&) const = default;
};

class Placement {
 public:
  Placement() = default;  // Replicate
  Placement(Replicate r) : value_(r) {}
  Placement(Shard s);  // throws unless s.blocks >= 1
  Placement(Partial p) : value_(p) {}

  bool is_replicate() const { return std::holds_alternative<Replicate>(value_); }
  bool is_shard() const { return std::holds_alternative<Shard>(value_); }
  bool is_partial() const { return std::holds_alternative<Partial>(value_); }
  int shard_dim() const;        // throws unless is_shard()
  int shard_blocks() const;     // throws unless is_shard()
  ReduceOp reduce_op() const;   // throws unless is_partial()

  // "Shard(0)", "Shard(1, blocks=3)", "Replicate()", "Partial(sum)"
  std::string to_string() const;
  bool operator==(const Placement&) const = default;

 private:
  std::variant<Replicate, Shard, Partial> value_;
};

}  // namespace meshtrain
