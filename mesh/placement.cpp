#include "mesh/placement.h"

#include "core/error.h"

namespace meshtrain {

int Placement::shard_dim() const {
  MT_CHECK(is_shard(), "shard_dim() of placement ", to_string());
  return std::get<Shard>(value_).dim;
}

ReduceOp Placement::reduce_op() const {
  MT_CHECK(is_partial(), "reduce_op() of placement ", to_string());
  return std::get<Partial>(value_).op;
}

std::string Placement::to_string() const {
  if (is_shard()) return detail::concat("Shard(", std::get<Shard>(value_).dim, ")");
  if (is_partial()) return detail::concat("Partial(", reduce_op_name(std::get<Partial>(value_).op), ")");
  return "Replicate()";
}

}  // namespace meshtrain
