#include "meshtrain/plugins/fsdp/fsdp_unit.h"

#include <algorithm>

#include "meshtrain/core/error.h"
#include "meshtrain/core/memory.h"
#include "meshtrain/core/ops/ops.h"
#include "meshtrain/core/trace/recorder.h"

namespace meshtrain {

std::string_view shard_state_name(ShardState state) {
  switch (state) {
    case ShardState::sharded: return "sharded";
    case ShardState::sharded_after_forward: return "sharded after forward";
    case ShardState::unsharded: return "unsharded";
  }
  return "unknown";
}

std::string_view training_phase_name(TrainingPhase phase) {
  switch (phase) {
    case TrainingPhase::idle: return "idle";
    case TrainingPhase::forward: return "forward";
    case TrainingPhase::pre_backward: return "pre-backward";
    case TrainingPhase::post_backward: return "post-backward";
  }
  return "unknown";
}

namespace {
// n elements of `src` from element `src_offset` into `dst` at `dst_offset`, converting dtypes.
void copy_elements(const Tensor& dst, int64_t dst_offset, const Tensor& src, int64_t src_offset,
                   int64_t n) {
  if (n > 0) ops::cast(dst.view(dst_offset, {n}), src.view(src_offset, {n}));
}
void zero_elements(const Tensor& dst, int64_t offset, int64_t n) {
  if (n > 0) dst.view(offset, {n}).zero_();
}

// How shard_range splits a parameter's rows over the shard ranks: ranks [0, full) hold a whole
// chunk each, rank `full` (when there is one) the `rest` elements left, the ranks after it none.
// The whole chunks move in one cast_columns, a row of the unit's shards [ranks, shard numel]
// per rank, rather than one copy per rank.
struct ChunkSplit {
  int64_t chunk = 0;  // elements of a whole chunk (the parameter's shard, padded)
  int64_t full = 0;
  int64_t rest = 0;
};
ChunkSplit chunk_split(const ParamShard& s, int ranks) {
  const int64_t chunk = s.shard_numel(), numel = s.rows * s.row_numel;
  if (chunk == 0) return {};
  const int64_t full = std::min<int64_t>(ranks, numel / chunk);
  return {.chunk = chunk, .full = full, .rest = numel - full * chunk};
}
// sum += x, with sum f32 and x f32 or narrower (widened through a temporary, on sum's device).
void add_as_f32(const Tensor& sum, const Tensor& x) {
  if (x.dtype() == DType::f32) {
    ops::axpy(sum, 1.f, x);
    return;
  }
  Tensor widened = Tensor::empty(x.shape(), DType::f32, sum.device());
  ops::cast(widened, x);
  ops::axpy(sum, 1.f, widened);
}
}  // namespace

FsdpUnit::FsdpUnit(std::string name, const std::vector<Parameter*>& params, FsdpUnitConfig config,
                   const ShardValues& values)
    : name_(std::move(name)),
      config_(config),
      layout_(
          make_unit_shard_layout(params, config.groups.shard ? config.groups.shard->size() : 1)) {
  MT_CHECK(!params.empty(), "FSDP unit '", name_, "' has no parameters");
  compute_device_ = params.front()->device();
  bool all_f32 = true;
  for (Parameter* p : params) all_f32 = all_f32 && p->dtype() == DType::f32;
  views_mode_ = shard_size() == 1 && all_f32 && config_.param_dtype == DType::f32 &&
                config_.reduce_dtype == DType::f32 && !config_.offload;
  {
    MemoryCategoryScope scope(MemoryCategory::param);
    master_ = shard_tensor(layout_.shard_numel, DType::f32);
    master_.zero_();
  }
  {
    MemoryCategoryScope scope(MemoryCategory::grad);
    // Beside the master, but never pinned: it never crosses to the GPU (the reduced shard does).
    grad_shard_ = Tensor::zeros({layout_.grad_shard_numel}, DType::f32, master_.device());
  }
  for (const ParamShard& s : layout_.params) {
    const Layout layout = shard_layout(s);
    const Shape shape = layout.local_shape(s.param->global_shape(), values.mesh, values.rank);
    MT_ASSERT_EQ(shape_numel(shape), s.rows_of(shard_rank(), shard_size()).size * s.row_numel,
                 "parameter '", s.param->name(), "': its shard under ", layout.to_string(),
                 " disagrees with the shard group");
    fill_local(values.source, *s.param, layout, values.mesh, values.rank,
               master_.view(s.offset, shape));
  }
  full_grads_.resize(layout_.params.size());
  f32_sums_.resize(layout_.params.size());
  if (views_mode_) {
    install_views();
  } else {
    reshard(ShardState::sharded);
  }
}

Tensor FsdpUnit::shard_tensor(int64_t numel, DType dtype) const {
  if (!config_.offload) return Tensor::empty({numel}, dtype, compute_device_);
  if (compute_device_.is_cuda()) return Tensor::empty_pinned({numel}, dtype);
  return Tensor::empty({numel}, dtype, Device::cpu());
}

void FsdpUnit::install_views() {
  for (const ParamShard& s : layout_.params) {
    Parameter& p = *s.param;
    p.set_value(master_.view(s.offset, p.shape()));
    if (p.requires_grad()) p.set_grad(grad_shard_.view(s.grad_offset, p.shape()));
    p.make_available();
  }
  state_ = ShardState::unsharded;
}

std::string FsdpUnit::unavailable_reason() const {
  return detail::concat("its FSDP unit '", name_, "' is ", shard_state_name(state_),
                        " (resharded in phase ", training_phase_name(phase_), ")");
}

void FsdpUnit::begin_unshard() {
  MT_ASSERT(needs_gather(), "FSDP unit '", name_, "' cannot start an all-gather while ",
            shard_state_name(state_), gather_ ? " with one in flight" : "");
  MemoryCategoryScope scope(MemoryCategory::comm);
  Gather g;
  if (config_.param_dtype == DType::f32) {
    g.input = master_;  // safe: every gather completes before the optimizer writes the master
  } else {
    g.input = shard_tensor(layout_.shard_numel, config_.param_dtype);
    ops::cast(g.input, master_);
  }
  // Offloaded, the shard crosses to the compute device in param_dtype (the smaller copy): inside
  // the all-gather, on the backend's stream, or here for a shard group of one.
  if (shard_size() == 1) {
    g.output = g.input.on(compute_device_);
  } else {
    g.output = Tensor::empty({shard_size() * layout_.shard_numel}, config_.param_dtype,
                             compute_device_);
    const trace::CommLabel label(name_);  // traced as "all_gather <unit>"
    g.work = config_.groups.shard->all_gather_into(g.output, g.input);
  }
  gather_ = std::move(g);
}

void FsdpUnit::unshard() {
  if (state_ == ShardState::unsharded) return;
  if (!gather_) begin_unshard();
  Gather g = std::move(*gather_);
  gather_.reset();
  if (g.work) g.work->wait();
  for (const ParamShard& s : layout_.params) {
    s.param->set_value(assemble(g.output, s, config_.param_dtype));
    s.param->make_available();
  }
  state_ = ShardState::unsharded;
}

Tensor FsdpUnit::assemble(const Tensor& gathered, const ParamShard& s, DType dtype) const {
  MemoryCategoryScope scope(MemoryCategory::unsharded_param);
  Tensor full = Tensor::empty(s.param->shape(), dtype, compute_device_);
  const Tensor flat = full.flatten();
  const ChunkSplit split = chunk_split(s, shard_size());
  if (split.full > 0)
    ops::cast_columns(flat.view(0, {split.full, split.chunk}), 0,
                      gathered.view(0, {split.full, layout_.shard_numel}), s.offset, split.chunk);
  copy_elements(flat, split.full * split.chunk, gathered,
                split.full * layout_.shard_numel + s.offset, split.rest);
  return full;
}

void FsdpUnit::reshard(ShardState to) {
  MT_ASSERT(to != ShardState::unsharded, "reshard to the unsharded state");
  if (views_mode_) return;
  state_ = to;
  const std::string reason = unavailable_reason();
  for (const ParamShard& s : layout_.params) s.param->make_unavailable(reason);
}

void FsdpUnit::prepare_grads() {
  if (views_mode_) return;
  MT_ASSERT(state_ == ShardState::unsharded, "FSDP unit '", name_, "' runs backward while ",
            shard_state_name(state_));
  MemoryCategoryScope scope(MemoryCategory::unsharded_grad);
  for (size_t i = 0; i < layout_.params.size(); ++i) {
    Parameter& p = *layout_.params[i].param;
    const bool trainable = layout_.params[i].grad_offset >= 0;
    MT_CHECK(p.requires_grad() == trainable, "parameter '", p.name(), "' changed requires_grad to ",
             p.requires_grad() ? "true" : "false",
             " after FSDP sharded it; freeze parameters before applying the plan");
    if (!trainable) continue;
    if (!full_grads_[i].defined())
      full_grads_[i] = Tensor::zeros(p.shape(), config_.param_dtype, compute_device_);
    p.set_grad(full_grads_[i]);
  }
}

void FsdpUnit::reduce_grads(bool last_micro_batch) {
  if (views_mode_) {
    // Gradients accumulate in place; replicas sum them once, after the last micro-batch.
    if (last_micro_batch && config_.groups.replicate) {
      const trace::CommLabel label(name_);
      replicate_reduce_ = config_.groups.replicate->all_reduce(grad_shard_, ReduceOp::sum);
    }
    return;
  }
  if (config_.grad_sync == GradSync::last_micro_batch) {
    if (config_.param_dtype != DType::f32) accumulate_in_f32();
    if (!last_micro_batch) return;
  }
  if (reduction_) finish_reduction(true);  // the previous micro-batch's, still across replicas
  MemoryCategoryScope scope(MemoryCategory::comm);
  const int64_t segment = layout_.grad_shard_numel;
  Reduction red;
  red.staging = Tensor::empty({shard_size() * segment}, config_.reduce_dtype, compute_device_);
  for (size_t i = 0; i < layout_.params.size(); ++i) {
    const ParamShard& s = layout_.params[i];
    if (s.grad_offset < 0) continue;
    const Tensor flat = (f32_sums_[i].defined() ? f32_sums_[i] : full_grads_[i]).flatten();
    const ChunkSplit split = chunk_split(s, shard_size());
    if (split.full > 0)
      ops::cast_columns(red.staging.view(0, {split.full, segment}), s.grad_offset,
                        flat.view(0, {split.full, split.chunk}), 0, split.chunk);
    // The ranks past the whole chunks: the rest, then padding, which reduces to zero.
    for (int64_t r = split.full; r < shard_size(); ++r) {
      const int64_t at = r * segment + s.grad_offset;
      const int64_t n = r == split.full ? split.rest : 0;
      copy_elements(red.staging, at, flat, split.full * split.chunk, n);
      zero_elements(red.staging, at + n, split.chunk - n);
    }
    full_grads_[i] = Tensor();  // the unit has resharded: this was the last handle
    f32_sums_[i] = Tensor();
  }
  if (shard_size() == 1) {
    red.output = red.staging;
  } else {
    // Offloaded, the reduce-scatter copies the reduced shard out to the host itself, unless
    // replicas still have to sum it on the compute device.
    red.output = config_.groups.replicate
                     ? Tensor::empty({segment}, config_.reduce_dtype, compute_device_)
                     : shard_tensor(segment, config_.reduce_dtype);
    const trace::CommLabel label(name_);
    red.scatter = config_.groups.shard->reduce_scatter_into(red.output, red.staging, ReduceOp::sum);
  }
  reduction_ = std::move(red);
}

void FsdpUnit::accumulate_in_f32() {
  MemoryCategoryScope scope(MemoryCategory::unsharded_grad);
  for (size_t i = 0; i < full_grads_.size(); ++i) {
    if (!full_grads_[i].defined()) continue;
    if (!f32_sums_[i].defined()) {
      f32_sums_[i] = Tensor::empty(full_grads_[i].shape(), DType::f32, compute_device_);
      ops::cast(f32_sums_[i], full_grads_[i]);
    } else {
      add_as_f32(f32_sums_[i], full_grads_[i]);
    }
    // Zeroed in place, not dropped: it is the parameter's gradient, which a later backward part
    // (a zero-bubble W after the next micro-batch's I) still adds into.
    full_grads_[i].zero_();
  }
}

void FsdpUnit::finish_reduction(bool wait_for_replicas) {
  if (replicate_reduce_ && wait_for_replicas) {
    replicate_reduce_->wait();
    replicate_reduce_.reset();
  }
  if (!reduction_) return;
  Reduction& red = *reduction_;
  if (red.scatter) {
    red.scatter->wait();
    red.scatter.reset();
    red.staging = Tensor();
  }
  // Replicas sum the reduced shard: small, so it may run beside the rest of the backward.
  if (config_.groups.replicate && !red.replicate) {
    const trace::CommLabel label(name_);
    red.replicate = config_.groups.replicate->all_reduce(red.output, ReduceOp::sum);
  }
  if (red.replicate) {
    if (!wait_for_replicas) return;
    red.replicate->wait();
  }
  MemoryCategoryScope scope(MemoryCategory::comm);
  // Offloaded: the reduced shard comes back to the host (if the collective did not bring it),
  // where the optimizer steps.
  add_as_f32(grad_shard_, red.output.on(master_.device()));
  reduction_.reset();
}

Layout FsdpUnit::shard_layout(const ParamShard& s) const {
  return shard_size() > 1 ? s.param->layout().then(config_.groups.shard_axis, Shard{0})
                          : s.param->layout();
}

std::vector<OptimizerSlot> FsdpUnit::slots(bool include_frozen) {
  std::vector<OptimizerSlot> slots;
  for (const ParamShard& s : layout_.params) {
    const bool frozen = s.grad_offset < 0;
    if (frozen && !include_frozen) continue;
    const int64_t n = s.rows_of(shard_rank(), shard_size()).size * s.row_numel;
    if (n == 0) continue;  // this rank holds none of it: padding never reaches the optimizer
    OptimizerSlot slot;
    slot.name = s.param->name();
    slot.param = master_.view(s.offset, {n});
    if (!frozen) slot.grad = grad_shard_.view(s.grad_offset, {n});
    slot.decays = s.param->decays();
    slot.layout = shard_layout(s);
    slot.tied_copy = s.param->tied_copy();
    slots.push_back(std::move(slot));
  }
  return slots;
}

void FsdpUnit::zero_grad() { grad_shard_.zero_(); }

}  // namespace meshtrain
