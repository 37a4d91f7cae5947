// FsdpUnit: one FSDP unit (a transformer block, or the root) and its explicit state machine.
//
// Between uses the unit holds only its flat shard: the fp32 master shard (MemoryCategory::param)
// and the fp32 gradient shard (MemoryCategory::grad), on the parameters' device or, offloaded, in
// host memory (as FSDP2's CPUOffloadPolicy: on a GPU the all-gather copies the pinned master in
// and the reduce-scatter copies the reduced shard out, on the backend's stream). Around compute
// it all-gathers the shards, copies them out into full parameters
// (MemoryCategory::unsharded_param) and installs them on the Parameter objects; backward
// accumulates into full gradients (MemoryCategory::unsharded_grad), which are packed rank by rank
// and reduce-scattered into the gradient shard. Collective staging buffers are
// MemoryCategory::comm.
//
// With a shard group of one and fp32 throughout (plain data parallelism), the full parameters and
// gradients are views of the shards themselves: nothing is gathered or copied, and gradients are
// all-reduced in place once per step.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "meshtrain/core/comm/communicator.h"
#include "meshtrain/plugins/fsdp/fsdp_options.h"
#include "meshtrain/plugins/fsdp/shard_layout.h"
#include "meshtrain/parallel/optimizer_slot.h"
#include "meshtrain/parallel/parameter_source.h"

namespace meshtrain {

enum class ShardState { sharded, sharded_after_forward, unsharded };
enum class TrainingPhase { idle, forward, pre_backward, post_backward };
std::string_view shard_state_name(ShardState state);
std::string_view training_phase_name(TrainingPhase phase);

// The communicators a unit uses; null means a group of one.
struct FsdpGroups {
  Communicator* shard = nullptr;
  Communicator* replicate = nullptr;
  std::string shard_axis;  // the mesh axis (or flattened "dp") the shard group spans
};

struct FsdpUnitConfig {
  FsdpGroups groups;
  DType param_dtype = DType::f32;
  DType reduce_dtype = DType::f32;
  GradSync grad_sync = GradSync::every_micro_batch;
  bool reshard_after_forward = true;
  bool offload = false;  // shards in host memory (FsdpOptions::offload)
};

// Where a unit's shards come from: the plan's values, for this rank of this mesh.
struct ShardValues {
  const ParameterSource& source;
  const MeshLayout& mesh;
  int rank;
};

class FsdpUnit {
 public:
  // Allocates this rank's shards and fills them from `values` (no rank holds a full parameter).
  FsdpUnit(std::string name, const std::vector<Parameter*>& params, FsdpUnitConfig config,
           const ShardValues& values);

  const std::string& name() const { return name_; }
  ShardState state() const { return state_; }
  TrainingPhase phase() const { return phase_; }
  const UnitShardLayout& layout() const { return layout_; }
  bool reshard_after_forward() const { return config_.reshard_after_forward; }
  bool gather_in_flight() const { return gather_.has_value(); }
  bool needs_gather() const { return state_ != ShardState::unsharded && !gather_; }

  void set_phase(TrainingPhase phase) { phase_ = phase; }
  // Collective: starts the all-gather of the parameters (asynchronous).
  void begin_unshard();
  // Completes the all-gather (starting it first if needed) and installs the full parameters.
  void unshard();
  // Frees the full parameters; reading them afterwards raises an error naming this unit.
  void reshard(ShardState to);
  // Installs full gradient buffers for backward (kept ones when accumulating unsharded).
  void prepare_grads();
  // After this unit's backward and reshard: reduce-scatter the gradients now (freeing each full
  // gradient as it is packed), or keep them unsharded until `last_micro_batch` under
  // GradSync::last_micro_batch (summed in f32 when they are computed in bf16).
  void reduce_grads(bool last_micro_batch);
  bool reduction_pending() const { return reduction_.has_value() || replicate_reduce_ != nullptr; }
  // Waits for the pending reduce-scatter and adds the result into the gradient shard. Across
  // replicas the reduced shard is then all-reduced: without `wait_for_replicas` that all-reduce
  // is only started, and a later call finishes it.
  void finish_reduction(bool wait_for_replicas);

  std::vector<OptimizerSlot> optimizer_slots() { return slots(false); }
  // Every master shard this rank holds, frozen parameters' too (with no gradient).
  std::vector<OptimizerSlot> held_slots() { return slots(true); }
  void zero_grad();

 private:
  struct Gather {
    Tensor input;
    Tensor output;
    WorkPtr work;
  };
  struct Reduction {
    Tensor staging;
    Tensor output;
    WorkPtr scatter;
    WorkPtr replicate;
  };

  int shard_size() const { return layout_.world; }
  int shard_rank() const { return config_.groups.shard ? config_.groups.shard->rank() : 0; }
  // A flat buffer that crosses between the shards and the collectives: on the compute device or,
  // offloaded, in host memory, pinned when the compute device is a GPU so that the copies to and
  // from it are asynchronous DMA. Uninitialised.
  Tensor shard_tensor(int64_t numel, DType dtype) const;
  void install_views();
  // Where the rank's shard of a parameter sits in the global tensor.
  Layout shard_layout(const ParamShard& s) const;
  std::vector<OptimizerSlot> slots(bool include_frozen);
  // The full value of one parameter from all-gathered flat shards (W segments), as `dtype`.
  Tensor assemble(const Tensor& gathered, const ParamShard& s, DType dtype) const;
  std::string unavailable_reason() const;
  // Adds the bf16 full gradients into f32 sums and zeroes them for what follows: with
  // GradSync::last_micro_batch, summing in bf16 would round away the low bits of each
  // micro-batch's share, as FSDP2 and Megatron avoid too.
  void accumulate_in_f32();

  std::string name_;
  FsdpUnitConfig config_;
  UnitShardLayout layout_;
  bool views_mode_ = false;
  ShardState state_ = ShardState::sharded;
  TrainingPhase phase_ = TrainingPhase::idle;
  // Where full parameters, gradients and collectives live; the shards live on master_'s device
  // (the host when offloaded).
  Device compute_device_;
  Tensor master_;       // f32 [shard_numel]
  Tensor grad_shard_;   // f32 [grad_shard_numel]
  std::vector<Tensor> full_grads_;  // per parameter; kept across micro-batches when syncing last
  std::vector<Tensor> f32_sums_;    // per parameter: accumulate_in_f32's sums, until reduced
  std::optional<Gather> gather_;
  std::optional<Reduction> reduction_;
  WorkPtr replicate_reduce_;  // views mode: the in-place all-reduce of the gradient shard
};


}  // namespace meshtrain
