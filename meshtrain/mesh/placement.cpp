#include "meshtrain/mesh/placement.h"

#include "meshtrain/core/error.h"

namespace meshtrain {

Placement::Placement(Shard s) : value_(s) {
  MT_CHECK(s.blocks >= 1, "Shard(", s.dim, ", blocks=", s.blocks,
           "): a sharded dim is made of at least 1 block");
}

int Placement::shard_dim() const {
  MT_CHECK(is_shard(), "shard_dim() needs a Shard placement, got ", to_string());
  return std::get<Shard>(value_).dim;
}

int Placement::shard_blocks() const {
  MT_CHECK(is_shard(), "shard_blocks() needs a Shard placement, got ", to_string());
  return std::get<Shard>(value_).blocks;
}

ReduceOp Placement::reduce_op() const {
  MT_CHECK(is_partial(), "reduce_op() needs a Partial placement, got ", to_string());
  return std::get<Partial>(value_).op;
}

std::string Placement::to_string() const {
  if (is_shard()) {
    const Shard& s = std::get<Shard>(value_);
    if (s.blocks == 1) return detail::concat("Shard(", s.dim, ")");
    return detail::concat("Shard(", s.dim, ", blocks=", s.blocks, ")");
  }
  if (is_partial()) return detail::concat("Partial(", reduce_op_name(std::get<Partial>(value_).op), ")");
  return "Replicate()";
}

}  // namespace meshtrain
