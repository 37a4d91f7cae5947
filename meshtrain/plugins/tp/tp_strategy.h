// TpStrategy: Megatron-LM tensor parallelism on the `tp` axis, registered as "tp".
//
// It applies the model's tensor-parallel plan (Model::tensor_parallel_plan: which module is
// column-parallel, row-parallel, vocab-parallel, ...): each matching module shards its parameters
// over tp and switches to its parallel form (parallel/nn). FSDP, applied after it, then shards the
// TP-local pieces over the data axes with its units unchanged.
//
//   plan.add(std::make_unique<TpStrategy>(TpOptions{.sequence_parallel = true}), {"tp"});
#pragma once

#include "meshtrain/parallel/strategy.h"
#include "meshtrain/parallel/strategy_registry.h"

namespace meshtrain {

struct TpOptions {
  // Korthikanti et al. 2022: LayerNorm, residual and embedding regions split by token rows over
  // tp; all-gathers and reduce-scatters replace the all-reduces.
  bool sequence_parallel = false;
};

class TpStrategy : public Strategy {
 public:
  explicit TpStrategy(TpOptions options = {}) : options_(options) {}
  std::string name() const override { return "tp"; }
  StrategyKind kind() const override { return StrategyKind::tensor; }
  // Axes: exactly {"tp"}.
  // Every rule of the model's plan matches a module, and each module can take its style over tp.
  void check_model(Model& model, const MeshLayout& mesh,
                   const std::vector<std::string>& axes) const override;
  void apply(ParallelContext& ctx, const std::vector<std::string>& axes) override;
  // Sequence parallelism needs micro-batches whose token rows divide by tp.
  void check_plan(const PlannedRun& run) const override;
  ModelStateShare model_state_share(const MeshLayout& mesh,
                                    const std::vector<std::string>& axes) const override;
  const TpOptions& options() const { return options_; }

 private:
  TpOptions options_;
};

// "tp", its option sequence_parallel declared with its flag.
void register_tp(StrategyRegistry& registry);

}  // namespace meshtrain
