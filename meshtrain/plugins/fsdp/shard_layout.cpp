#include "meshtrain/plugins/fsdp/shard_layout.h"

namespace meshtrain {

UnitShardLayout make_unit_shard_layout(const std::vector<Parameter*>& params, int world) {
  UnitShardLayout layout;
  layout.world = world;
  for (Parameter* p : params) {
    ParamShard s;
    s.param = p;
    s.rows = p->shape().empty() ? 1 : p->shape()[0];
    s.row_numel = s.rows == 0 ? 0 : p->numel() / s.rows;
    s.chunk_rows = shard_chunk(s.rows, world);
    s.offset = layout.shard_numel;
    layout.shard_numel += s.shard_numel();
    if (p->requires_grad()) {
      s.grad_offset = layout.grad_shard_numel;
      layout.grad_shard_numel += s.shard_numel();
    }
    layout.params.push_back(s);
  }
  return layout;
}

}  // namespace meshtrain
