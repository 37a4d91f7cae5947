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

int phase_count(CommOp op) {
  switch (op) {
    case CommOp::barrier: return 1;     // arriving is the whole op
    case CommOp::all_reduce: return 3;  // arrive, reduce-scatter, all-gather
    default: return 2;                  // arrive, move data, release
  }
}

}  // namespace meshtrain::local
