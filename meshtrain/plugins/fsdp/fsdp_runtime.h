// FsdpRuntime: drives the FSDP units through a training step from the engine's hooks — all-gather
// before a unit computes, prefetch of the next units within the in-flight limit, reshard after
// forward, gradient reduction after backward — and owns the sharded trainable state.
#pragma once

#include <memory>
#include <vector>

#include "meshtrain/parallel/hooks.h"
#include "meshtrain/parallel/trainable_state.h"
#include "meshtrain/parallel/units.h"
#include "meshtrain/plugins/fsdp/fsdp_unit.h"

namespace meshtrain {

class FsdpRuntime : public StepHooks {
 public:
  // `pipelined`: micro-batches interleave forward and backward (a pipeline schedule), so a unit
  // keeps its full parameters from its first forward to its last backward of the step.
  FsdpRuntime(const UnitPlan& plan, std::vector<std::unique_ptr<FsdpUnit>> units,
              FsdpGroups groups, int prefetch, bool pipelined);

  void begin_micro_batch(int index, int count) override;
  void pre_forward(int unit, int micro_batch) override;
  void post_forward(int unit, int micro_batch) override;
  void pre_backward(int unit, int micro_batch) override;
  void post_backward(int unit, int micro_batch, bool last_backward) override;
  void finish_backward() override;
  // Reshards every unit a forward-only pass left gathered (kept for a backward that never comes:
  // reshard_after_forward off, a pipeline, a prefetch), so the pass holds nothing after it.
  void finish_forward_only() override;

  const std::vector<std::unique_ptr<FsdpUnit>>& units() const { return units_; }
  const FsdpGroups& groups() const { return groups_; }
  // The most all-gathers ever in flight at once (prefetched or started on demand).
  int max_in_flight_seen() const { return max_in_flight_seen_; }

 private:
  // Starts all-gathers for the units after `unit` in `order` while fewer than `prefetch_` are in
  // flight; units that need no gather are skipped.
  void prefetch_after(int unit, const std::vector<int>& order);
  int in_flight() const;
  void unshard(FsdpUnit& u);
  void finish_reductions(bool wait_for_replicas);

  std::vector<int> forward_order_;
  std::vector<int> backward_order_;
  std::vector<std::unique_ptr<FsdpUnit>> units_;
  FsdpGroups groups_;
  int prefetch_;
  bool pipelined_;
  int max_in_flight_seen_ = 0;
};

// The optimizer's view of FSDP: this rank's master shards and gradient shards.
class FsdpTrainableState : public TrainableState {
 public:
  explicit FsdpTrainableState(FsdpRuntime& runtime) : runtime_(runtime) {}
  std::vector<OptimizerSlot> optimizer_slots() override;
  void zero_grad() override;
  std::vector<OptimizerSlot> held_slots() override;

 private:
  FsdpRuntime& runtime_;
};

}  // namespace meshtrain
