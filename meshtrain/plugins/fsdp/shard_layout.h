// Where each parameter of an FSDP unit lives in the unit's flat shard.
//
// Every parameter is sharded on dim 0 over the W ranks of the shard group (FSDP2 semantics): rank r
// holds rows shard_range(rows, W, r), padded to chunk_rows = ceil(rows / W) rows so that all ranks
// hold equally many elements. A unit's flat shard is its parameters' padded shards back to back;
// the all-gather of the flat shards therefore yields W segments, segment r holding rank r's rows of
// every parameter. Gradients use the same layout restricted to trainable parameters.
#pragma once

#include <cstdint>
#include <vector>

#include "meshtrain/mesh/shard_math.h"
#include "meshtrain/parallel/parameter.h"

namespace meshtrain {

struct ParamShard {
  Parameter* param = nullptr;
  int64_t rows = 0;          // dim 0 of the full shape (1 for a scalar)
  int64_t row_numel = 0;     // elements per row
  int64_t chunk_rows = 0;    // rows per rank, padded
  int64_t offset = 0;        // in the unit's flat parameter shard
  int64_t grad_offset = -1;  // in the unit's flat gradient shard; -1 when frozen

  int64_t shard_numel() const { return chunk_rows * row_numel; }
  ShardRange rows_of(int rank, int world) const { return shard_range(rows, world, rank); }
};

struct UnitShardLayout {
  int world = 1;
  std::vector<ParamShard> params;
  int64_t shard_numel = 0;       // padded elements per rank, all parameters
  int64_t grad_shard_numel = 0;  // padded elements per rank, trainable parameters
};

UnitShardLayout make_unit_shard_layout(const std::vector<Parameter*>& params, int world);

}  // namespace meshtrain
