// FSDP options, as a PyTorch FSDP2 user would set them.
#pragma once

#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "meshtrain/core/dtype.h"
#include "meshtrain/parallel/model.h"

namespace meshtrain {

enum class FsdpMode {
  full,     // ZeRO-3: shard parameters, gradients and optimizer state; reshard after forward
  grad_op,  // ZeRO-2: as full, but keep parameters unsharded from forward until backward
  none,     // plain data parallelism: replicated parameters, all-reduced gradients (DDP)
  hybrid,   // HSDP: shard within dp_shard, all-reduce the gradient shards across dp_replicate
};
FsdpMode parse_fsdp_mode(std::string_view text);
std::string_view fsdp_mode_name(FsdpMode mode);

// When gradients are reduced under gradient accumulation.
enum class GradSync {
  every_micro_batch,  // reduce-scatter each micro-batch into the sharded gradient
  last_micro_batch,   // keep unsharded gradients and reduce once, after the last micro-batch
};
GradSync parse_grad_sync(std::string_view text);

struct FsdpOptions {
  // Every member has an initializer, so that designated initializers ({.mode = ...}) that
  // leave some out compile without -Wmissing-field-initializers warnings in users' builds.
  FsdpMode mode = FsdpMode::full;
  // At most this many all-gathers in flight (the rate limiter); 0 turns prefetching off.
  int prefetch = 2;
  DType param_dtype = DType::f32;   // dtype of the all-gather (compute sees these values)
  DType reduce_dtype = DType::f32;  // dtype of gradient reduction
  // Unset: every micro-batch; under pipeline parallelism always the last (a schedule interleaves
  // micro-batches), where asking for every one is an error rather than silently ignored.
  std::optional<GradSync> grad_sync{};
  // Whether blocks free their full parameters after forward (and gather them again for backward).
  // Unset: yes for full and hybrid, except under pipeline parallelism, where several micro-batches
  // are in flight between a unit's forward and backward (as torchtitan does).
  std::optional<bool> reshard_after_forward{};
  // CPU offload, as FSDP2's CPUOffloadPolicy: the fp32 master shards, gradient shards and AdamW
  // state live in host memory and the optimizer steps there; each all-gather copies its shard to
  // the compute device first, each reduced gradient shard comes back to the host.
  bool offload = false;
  // The root unit (embeddings and tied head) stays unsharded from forward to backward, as in FSDP2.
  bool reshard_root_after_forward = false;
  // Which layers form one unit; empty: the model's default (GPT-2: the root, then one per block).
  std::function<std::vector<UnitSpec>(Model&)> unit_policy{};
};

// A unit policy that puts `blocks` consecutive units into one; the root stays a unit of its own.
std::function<std::vector<UnitSpec>(Model&)> group_units_policy(int blocks);

}  // namespace meshtrain
