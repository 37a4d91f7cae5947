// PlanLayout: a training layout as the planner reads it, before any rank exists: the mesh
// (pp x dp_replicate x dp_shard x tp, meshtrain/mesh/mesh_layout.h) and the options of the
// built-in strategies that serve its axes, in the plugins' own option types. Each mesh axis is
// served as a run serves it (plugin_for_axis): pp by "pp" (any size: its runner pipelines even
// one rank), tp by "tp", the data axes together by "fsdp". Options of a plugin the mesh gives no
// axis are ignored. Activation checkpointing, the engine's, belongs to the layout too.
//
//   PlanLayout layout{.mesh = parse_mesh_spec("pp=2,dp_shard=4,tp=2")};
//   layout.fsdp.param_dtype = DType::bf16;
#pragma once

#include <string>
#include <vector>

#include "meshtrain/mesh/mesh_layout.h"
#include "meshtrain/models/token_batches.h"
#include "meshtrain/parallel/parallel_plan.h"
#include "meshtrain/plugins/fsdp/fsdp_options.h"
#include "meshtrain/plugins/pp/pp_strategy.h"
#include "meshtrain/plugins/tp/tp_strategy.h"
#include "meshtrain/train/train_config.h"

namespace meshtrain {

struct PlanLayout {
  MeshLayout mesh;
  FsdpOptions fsdp{};  // mode, param_dtype, prefetch, reshard, units, offload
  TpOptions tp{};
  PpOptions pp{};
  ActivationCheckpointing ac{};

  bool pipelined() const;        // a pp axis: the pp plugin splits the model into stages
  bool tensor_parallel() const;  // a tp axis: the tp plugin applies the model's TP plan
  bool data_parallel() const;    // a data axis: FSDP holds the trainable state
  std::vector<std::string> fsdp_axes() const;  // the data axes, in mesh order
  // The axis FSDP shards over, as FsdpStrategy resolves its groups: the one data axis, or "dp"
  // (both flattened), under full and grad_op; dp_shard under hybrid; "" (no sharding) under none
  // or without a data axis. InvalidArgument for hybrid without both data axes.
  std::string fsdp_shard_axis() const;
  int fsdp_shard_size() const;  // the ranks of that group (1: none)

  // "pp=2,dp_shard=2,tp=2 fsdp=full param_dtype=bf16 schedule=interleaved virtual=2 sp
  // ac=selective ac_every=2": the mesh, then what its axes' strategies and the engine do.
  std::string to_string() const;
};

// What a step computes: the global batch in sequences of `seq` tokens, each data rank's share in
// `micro_batches` micro-batches (a run's --batch, --seq and --grad-accum).
struct Workload {
  int64_t batch = 1;
  int64_t seq = 1;
  int micro_batches = 1;

  // InvalidArgument unless each of the layout's data ranks gets micro_batches whole micro-batches.
  void check(const PlanLayout& layout) const;
  // The sequences of one micro-batch on one data rank.
  int64_t micro_batch_rows(const PlanLayout& layout) const;
  // A data rank's batch split as the trainer splits it: micro_batches views of its rows, so the
  // batch is held until the step ends.
  std::vector<MicroBatch> micro_batches_of(const TokenBatch& batch) const;
};

// The layout's strategies bound to their axes, as bind_strategies binds a run's (plugin_axes).
ParallelPlan strategies_of(const PlanLayout& layout);

// The layout a run of `config` trains with: its mesh and the options of the strategies the run
// binds (bind_strategies), so that every default is the run's. InvalidArgument when an axis is
// served by a plugin other than the built-ins, whose rules the planner does not know.
PlanLayout plan_layout(const TrainConfig& config);
// The workload of a run of `config`.
Workload plan_workload(const TrainConfig& config);

}  // namespace meshtrain
