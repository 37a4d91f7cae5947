// FsdpStrategy: fully sharded data parallelism (ZeRO-3) and its relatives, registered as "fsdp" on
// the mesh's data axes. See fsdp_options.h for the modes and docs/fsdp.md for the design.
//
//   DeviceMesh mesh(world, {{"dp_shard", 4}});
//   ParallelPlan plan;
//   auto fsdp = std::make_unique<FsdpStrategy>(FsdpOptions{.mode = FsdpMode::full});
//   FsdpStrategy* handle = fsdp.get();
//   plan.add(std::move(fsdp), {"dp_shard"});
//   ParallelModel pm = plan.apply(mesh, model);
#pragma once

#include <functional>
#include <memory>

#include "meshtrain/parallel/strategy.h"
#include "meshtrain/parallel/strategy_registry.h"
#include "meshtrain/plugins/fsdp/fsdp_options.h"
#include "meshtrain/plugins/fsdp/fsdp_runtime.h"

namespace meshtrain {

class FsdpStrategy : public Strategy {
 public:
  explicit FsdpStrategy(FsdpOptions options = {});

  std::string name() const override { return "fsdp"; }
  StrategyKind kind() const override { return StrategyKind::data; }
  // Axes: dp_shard, dp_replicate or dp (both). full and grad_op shard over all bound axes, none
  // replicates over them, hybrid shards over dp_shard and replicates over dp_replicate. Every
  // data axis of size > 1 must be bound.
  void apply(ParallelContext& ctx, const std::vector<std::string>& axes) override;
  // 1 / the ranks it shards over (none: 1), on the host under offload.
  ModelStateShare model_state_share(const MeshLayout& mesh,
                                    const std::vector<std::string>& axes) const override;

  const FsdpOptions& options() const { return options_; }
  const FsdpRuntime& runtime() const;
  // Bytes moved by this rank on FSDP's communicators since construction.
  CommCounters counters() const;

 private:
  FsdpOptions options_;
  std::unique_ptr<FsdpRuntime> runtime_;
};

// "fsdp", its options declared (mode, prefetch, param_dtype, reduce_dtype, grad_sync,
// reshard_after_forward, reshard_root, blocks_per_unit, offload) with their flags.
void register_fsdp(StrategyRegistry& registry);

}  // namespace meshtrain
