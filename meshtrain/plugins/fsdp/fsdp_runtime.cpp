#include "meshtrain/plugins/fsdp/fsdp_runtime.h"

#include <algorithm>

#include "meshtrain/core/error.h"

namespace meshtrain {

FsdpRuntime::FsdpRuntime(const UnitPlan& plan, std::vector<std::unique_ptr<FsdpUnit>> units,
                         FsdpGroups groups, int prefetch, bool pipelined)
    : forward_order_(plan.forward_order),
      backward_order_(plan.backward_order),
      units_(std::move(units)),
      groups_(groups),
      prefetch_(prefetch),
      pipelined_(pipelined) {}

int FsdpRuntime::in_flight() const {
  return static_cast<int>(std::count_if(units_.begin(), units_.end(),
                                        [](const auto& u) { return u->gather_in_flight(); }));
}

void FsdpRuntime::prefetch_after(int unit, const std::vector<int>& order) {
  auto it = std::find(order.begin(), order.end(), unit);
  MT_ASSERT(it != order.end(), "FSDP unit ", unit, " is missing from the prefetch order");
  for (++it; it != order.end() && in_flight() < prefetch_; ++it)
    if (units_[*it]->needs_gather()) units_[*it]->begin_unshard();
  max_in_flight_seen_ = std::max(max_in_flight_seen_, in_flight());
}

void FsdpRuntime::finish_reductions(bool wait_for_replicas) {
  for (const auto& u : units_) u->finish_reduction(wait_for_replicas);
}

void FsdpRuntime::begin_micro_batch(int, int) {
  finish_reductions(true);  // a micro-batch's reductions end before the next one's begin
}

void FsdpRuntime::unshard(FsdpUnit& u) {
  // An all-gather started on demand (nothing prefetched it) is in flight too.
  if (u.needs_gather()) max_in_flight_seen_ = std::max(max_in_flight_seen_, in_flight() + 1);
  u.unshard();
}

void FsdpRuntime::pre_forward(int unit, int) {
  FsdpUnit& u = *units_[unit];
  u.set_phase(TrainingPhase::forward);
  unshard(u);
  prefetch_after(unit, forward_order_);
}

void FsdpRuntime::post_forward(int unit, int) {
  FsdpUnit& u = *units_[unit];
  if (u.reshard_after_forward()) u.reshard(ShardState::sharded_after_forward);
  u.set_phase(TrainingPhase::idle);
}

void FsdpRuntime::pre_backward(int unit, int) {
  FsdpUnit& u = *units_[unit];
  u.set_phase(TrainingPhase::pre_backward);
  unshard(u);
  prefetch_after(unit, backward_order_);
  u.prepare_grads();
}

void FsdpRuntime::post_backward(int unit, int, bool last_backward) {
  FsdpUnit& u = *units_[unit];
  u.set_phase(TrainingPhase::post_backward);
  // The previous unit's reduce-scatter had this unit's backward to complete; finishing it first
  // keeps one staging buffer alive at a time.
  finish_reductions(false);
  // Free the full parameters before the gradients are packed for reduction; under a pipeline
  // schedule, whose micro-batches interleave, only after the unit's last backward of the step.
  if (last_backward || !pipelined_) u.reshard(ShardState::sharded);
  u.reduce_grads(last_backward);
  u.set_phase(TrainingPhase::idle);
}

void FsdpRuntime::finish_backward() { finish_reductions(true); }

void FsdpRuntime::finish_forward_only() {
  for (const auto& u : units_) {
    // A prefetched gather completes before its buffers go.
    if (u->gather_in_flight()) u->unshard();
    if (u->state() != ShardState::sharded) u->reshard(ShardState::sharded);
    u->set_phase(TrainingPhase::idle);
  }
}

std::vector<OptimizerSlot> FsdpTrainableState::optimizer_slots() {
  std::vector<OptimizerSlot> slots;
  for (const auto& u : runtime_.units()) {
    std::vector<OptimizerSlot> mine = u->optimizer_slots();
    slots.insert(slots.end(), mine.begin(), mine.end());
  }
  return slots;
}

void FsdpTrainableState::zero_grad() {
  for (const auto& u : runtime_.units()) u->zero_grad();
}

std::vector<OptimizerSlot> FsdpTrainableState::held_slots() {
  std::vector<OptimizerSlot> slots;
  for (const auto& u : runtime_.units())
    for (OptimizerSlot& slot : u->held_slots()) slots.push_back(std::move(slot));
  return slots;
}

}  // namespace meshtrain
