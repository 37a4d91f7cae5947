// Model-state memory per rank, predicted before anything runs (the planner's first piece): for a
// model and a layout, the bytes each rank's allocators will count as
//   parameters  MemoryCategory::param      fp32 master values: FSDP's flat shards, padded to
//                                          ceil(rows / shards) rows per parameter, or whole
//                                          (TP pieces) without a data axis
//   gradients   MemoryCategory::grad       fp32, the same layout, trainable parameters only
//   optimizer   MemoryCategory::optimizer  AdamW's two fp32 moments of the rank's real elements
//                                          (padding never reaches the optimizer), after step 1
//   unsharded_unit_buffers  the peak of MemoryCategory::unsharded_param over a step: the full
//                           parameters (param_dtype) of the units FSDP holds gathered at once
// computed from the model's own parameters as the run's code paths narrow them: the family's
// build(), the pipeline split (partition_layers, StageModel), each module's tensor-parallel
// parallelize(), FSDP's units (make_unit_plan) and shard layout (make_unit_shard_layout). The
// parameters + gradients + optimizer of a rank are what StepMetrics::sharded_state_bytes reports
// (its maximum over ranks), wherever they live (host memory under offload).
//
// Fast (no step runs, no tensor exists): the rest of a rank's memory — activations at the
// schedule's peak, full gradients until their reduction, communication and pipeline buffers —
// comes from replaying the rank's step (rank_replay.h), which tells the ranks with equal shards
// apart by the optimizer bytes predicted here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "meshtrain/models/model_spec.h"
#include "meshtrain/plan/plan_layout.h"

namespace meshtrain {

struct ModelStateBytes {
  uint64_t parameters = 0;
  uint64_t gradients = 0;
  uint64_t optimizer = 0;
  uint64_t unsharded_unit_buffers = 0;

  // Held between steps: what StepMetrics::sharded_state_bytes counts for a rank.
  uint64_t sharded_state() const { return parameters + gradients + optimizer; }
  uint64_t total() const { return sharded_state() + unsharded_unit_buffers; }
  bool operator==(const ModelStateBytes&) const = default;
};

struct RankModelState {
  int rank = 0;             // in the mesh (the world rank)
  int pp_rank = 0;          // its pipeline rank (0 without pp)
  std::vector<int> stages;  // the pipeline stages it runs ({0} without pp)
  int tp_rank = 0;
  int shard_rank = 0;  // in FSDP's shard group
  ModelStateBytes bytes;

  // "rank 5 (pp rank 1: stages 1 and 3, tp rank 1, shard rank 0)".
  std::string where() const;
};

struct ModelStatePrediction {
  std::vector<RankModelState> ranks;  // every rank of the mesh, by rank

  // The rank with the largest total (the first of equals): pipeline stages differ, and under
  // uneven sizes so do tp and shard ranks.
  const RankModelState& largest() const;
  // The largest over ranks of each figure, as StepMetrics reports them.
  uint64_t max_sharded_state() const;
  uint64_t max_unsharded_unit_buffers() const;
};

// InvalidArgument for a layout the run would refuse (its strategies' option and model checks)
// or that the model cannot take.
ModelStatePrediction model_state_bytes(const ModelSpec& model, const PlanLayout& layout);

// The model state of each pipeline rank's first rank (tp rank 0, shard rank 0), by pp rank: the
// most of its stage's ranks (TP's first ranks take the remainder rows, FSDP pads only the last
// shards), at the cost of one rank's pieces per stage instead of every (pp, tp) coordinate's,
// and of the layout's checks once.
std::vector<ModelStateBytes> stage_leader_model_states(const ModelSpec& model,
                                                       const PlanLayout& layout);

}  // namespace meshtrain
