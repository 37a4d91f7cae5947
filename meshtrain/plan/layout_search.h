// The layout search (`meshtrain plan` without --mesh): every layout of the search space for a
// model on `world` devices, each predicted as `meshtrain plan --mesh ...` predicts one (its
// replays, rank_replay.h; its step, step_time.h), ranked by predicted tokens/s.
//
// The space, what a torchtitan or Megatron user varies, less the choices another one dominates:
//   tp              powers of two up to the devices per node (TP's collectives stay inside a
//                   node), with sequence parallelism: the same bytes as without it, and less
//                   activation memory
//   pp              the divisors of world / tp up to max_pp, each with 1F1B, interleaved (two
//                   stages per rank) and ZB-H1; not GPipe, whose bubble is 1F1B's while it holds
//                   every micro-batch in flight
//   data axes       the rest: FSDP full, grad_op or none (DDP) over all of them, and hybrid
//                   sharding within a node (dp_shard = devices per node / tp) across nodes
//   micro-batches   with a pipeline pp, 2 pp and 4 pp; without one 1, 2 and 4; each dividing the
//                   data rank's share of the batch
//   checkpointing   none, selective, full: the first that fits, as each only adds recomputation
// The options the space does not vary (dtypes, prefetch, units) are the base layout's.
//
// Each candidate costs one replay of each pipeline stage's first rank (stage_leaders in
// rank_replay.h), whatever the world's size, fewer when a stage does not fit; a candidate whose
// model state alone (model_state_bytes) exceeds the device's memory is not replayed. Meshes are
// searched on every core at once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "meshtrain/models/model_spec.h"
#include "meshtrain/plan/machine_profile.h"
#include "meshtrain/plan/plan_layout.h"
#include "meshtrain/plan/step_time.h"

namespace meshtrain {

struct SearchSpace {
  int world = 1;
  // The global batch and sequence length; the search chooses the micro-batches.
  Workload workload{};
  // The options the search leaves as given (FSDP's dtypes, prefetch, units); its mesh, FSDP
  // mode, schedule, sequence parallelism and checkpointing are the search's. Leave FSDP's
  // reshard_after_forward, grad_sync and offload unset: the space counts on their defaults for
  // each mode and pipeline.
  PlanLayout base{};
  int max_pp = 16;
};

// One candidate as the search predicts it.
struct PlannedLayout {
  PlanLayout layout;
  Workload workload;
  bool fits = false;
  bool replayed = false;  // false: the model state alone did not fit, nothing was replayed
  // Without fits: why, "model state 91.2 GiB (rank 0) over 80.0 GiB" or "peak 97.0 GiB (rank
  // 512) over 80.0 GiB".
  std::string does_not_fit{};
  // The rank whose step peaks highest (a stage's first rank), its peak, and its memory by
  // category; without replayed, the rank with the most model state, that state, and no
  // categories. The replays stop at the first stage over the device's memory: the peak of a
  // layout that does not fit is at least this.
  int peak_rank = 0;
  uint64_t peak_bytes = 0;
  MemoryStats peak_memory{};
  // The predicted step, the slowest rank and its terms, and what the step gives; only for a
  // layout that fits.
  double step_seconds = 0;
  int slowest_rank = 0;
  RankStepTime slowest{};
  Throughput throughput{};
};

struct LayoutSearch {
  std::vector<PlannedLayout> fitting;      // fastest first (tokens/s; then the smaller peak)
  // The nearest to fitting first, by peak_bytes: a lower bound of the peak where the replays
  // stopped at the first stage over the memory, or where only the model state was counted.
  std::vector<PlannedLayout> not_fitting;
  // Layouts the run would refuse (heads that tp does not divide, more stages than layers...),
  // as "layout: why", each reason once (one may cover a mesh's every schedule).
  std::vector<std::string> refused;
  int replays = 0;  // stage replays run
};

// InvalidArgument for a world below 1 or a workload without a batch and a sequence length.
LayoutSearch search_layouts(const ModelSpec& model, const SearchSpace& space,
                            const MachineProfile& machine);

}  // namespace meshtrain
