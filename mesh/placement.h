// Placements (as in DTensor): how a tensor lives along one mesh axis.
//   Shard(dim)   each rank of the axis holds one ceil-div chunk of `dim` (see shard_math.h)
//   Replicate()  each rank holds the whole tensor
//   Partial(op)  each rank holds a full-shaped tensor; the true value is their reduction by op
// Written as in DTensor: Placement p = Shard(0); Placement q = Partial(ReduceOp::avg);
#pragma once

#include <string>
#include <variant>

#include "core/comm/types.h"

namespace meshtrain {

struct Replicate {
  bool operator==(const Replicate&) const = default;
};
struct Shard {
  int dim = 0;
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
  Placement(Shard s) : value_(s) {}
  Placement(Partial p) : value_(p) {}

  bool is_replicate() const { return std::holds_alternative<Replicate>(value_); }
  bool is_shard() const { return std::holds_alternative<Shard>(value_); }
  bool is_partial() const { return std::holds_alternative<Partial>(value_); }
  int shard_dim() const;        // throws unless is_shard()
  ReduceOp reduce_op() const;   // throws unless is_partial()

  std::string to_string() const;  // "Shard(0)", "Replicate()", "Partial(sum)"
  bool operator==(const Placement&) const = default;

 private:
  std::variant<Replicate, Shard, Partial> value_;
};

}  // namespace meshtrain
