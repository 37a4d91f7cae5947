#include "meshtrain/core/comm/local/op_signature.h"

#include "meshtrain/core/error.h"

namespace meshtrain::local {

std::string describe(const OpSignature& s) {
  std::string qualifier;
  if (s.op == CommOp::reduce_scatter || s.op == CommOp::all_reduce)
    qualifier = detail::concat(" (", reduce_op_name(s.reduce), ")");
  else if (s.op == CommOp::broadcast)
    qualifier = detail::concat(" from root ", s.root);
  return detail::concat(comm_op_name(s.op), qualifier, " of ", s.bytes, " bytes (",
                        dtype_name(s.dtype), ")",
                        s.memory == DeviceKind::cuda   ? " in CUDA memory"
                        : s.memory == DeviceKind::meta ? " in shape-only buffers"
                                                       : "");
}

namespace {
// What the op writes over the group's outputs (signature.bytes: the buffer each rank passes in).
size_t output_bytes(const OpSignature& s, int group_size) {
  const size_t w = static_cast<size_t>(group_size);
  switch (s.op) {
    case CommOp::all_gather:
      return w * w * s.bytes;
    case CommOp::reduce_scatter:
      return s.bytes;
    default:
      return w * s.bytes;
  }
}
}  // namespace

bool last_rank_moves(const OpSignature& s, int group_size) {
  if (s.op == CommOp::barrier) return false;
  return s.memory == DeviceKind::meta ||
         (s.memory == DeviceKind::cpu && output_bytes(s, group_size) <= kLastRankMovesBytes);
}

int phase_count(const OpSignature& s, int group_size) {
  if (s.op == CommOp::barrier) return 1;         // arriving is the whole op
  if (last_rank_moves(s, group_size)) return 2;  // arrive; released once the last rank moved all
  return s.op == CommOp::all_reduce ? 3          // arrive, reduce-scatter, all-gather
                                    : 2;         // arrive, move data, release
}

}  // namespace meshtrain::local
