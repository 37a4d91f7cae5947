#include "meshtrain/plan/plan_layout.h"

#include <memory>

#include "meshtrain/core/error.h"
#include "meshtrain/mesh/axis_names.h"
#include "meshtrain/plugins/builtin_strategies.h"
#include "meshtrain/plugins/fsdp/fsdp_strategy.h"
#include "meshtrain/plugins/pp/schedule_generators.h"
#include "meshtrain/train/bound_strategies.h"

namespace meshtrain {

namespace {
bool serves(const MeshLayout& mesh, std::string_view plugin) {
  for (const MeshAxis& axis : mesh.axes())
    if (plugin_for_axis(axis.name) == plugin) return true;
  return false;
}
}  // namespace

bool PlanLayout::pipelined() const { return serves(mesh, "pp"); }
bool PlanLayout::tensor_parallel() const { return serves(mesh, "tp"); }
bool PlanLayout::data_parallel() const { return serves(mesh, "fsdp"); }

std::vector<std::string> PlanLayout::fsdp_axes() const {
  std::vector<std::string> axes;
  for (const MeshAxis& axis : mesh.axes())
    if (plugin_for_axis(axis.name) == "fsdp") axes.push_back(axis.name);
  return axes;
}

std::string PlanLayout::fsdp_shard_axis() const {
  const std::vector<std::string> axes = fsdp_axes();
  if (axes.empty()) return "";
  switch (fsdp.mode) {
    case FsdpMode::full:
    case FsdpMode::grad_op:
      return axes.size() == 1 ? axes[0] : std::string(mesh_axis::dp);
    case FsdpMode::none:
      return "";
    case FsdpMode::hybrid:
      MT_CHECK(mesh.has_axis(mesh_axis::dp_shard) && mesh.has_axis(mesh_axis::dp_replicate),
               "fsdp mode hybrid needs a mesh with dp_replicate and dp_shard; mesh is ",
               mesh.to_string());
      return std::string(mesh_axis::dp_shard);
  }
  throw InvalidArgument("unknown FSDP mode");
}

int PlanLayout::fsdp_shard_size() const {
  const std::string axis = fsdp_shard_axis();
  return axis.empty() ? 1 : mesh.span_size(axis);
}

std::string PlanLayout::to_string() const {
  std::string out = mesh.to_string();
  if (data_parallel())
    out += detail::concat(" fsdp=", fsdp_mode_name(fsdp.mode),
                          " param_dtype=", dtype_name(fsdp.param_dtype));
  if (pipelined()) out += detail::concat(" schedule=", schedule_kind_name(pp.schedule));
  if (pipelined() && pp.virtual_stages > 1) out += detail::concat(" virtual=", pp.virtual_stages);
  if (tensor_parallel() && tp.sequence_parallel) out += " sp";
  if (ac.mode != AcMode::none) out += detail::concat(" ac=", ac_mode_name(ac.mode));
  if (ac.mode == AcMode::selective) out += detail::concat(" ac_every=", ac.every);
  return out;
}

void Workload::check(const PlanLayout& layout) const {
  const int64_t dp = layout.mesh.span_size(mesh_axis::dp);
  MT_CHECK(seq >= 1 && micro_batches >= 1 && batch >= 1 && batch % (dp * micro_batches) == 0,
           "workload: a global batch of ", batch, " sequences of ", seq, " tokens in ",
           micro_batches, " micro-batches per data rank on ", layout.mesh.to_string(),
           ": sequences, tokens and micro-batches >= 1 expected, the batch a multiple of the ", dp,
           " data ranks times the micro-batches");
}

int64_t Workload::micro_batch_rows(const PlanLayout& layout) const {
  check(layout);
  return batch / layout.mesh.span_size(mesh_axis::dp) / micro_batches;
}

std::vector<MicroBatch> Workload::micro_batches_of(const TokenBatch& batch) const {
  const int64_t rows = batch.tokens.shape()[0] / micro_batches;
  std::vector<MicroBatch> out(static_cast<size_t>(micro_batches));
  for (int k = 0; k < micro_batches; ++k) {
    out[k].tokens = batch.tokens.rows(k * rows, rows);
    out[k].targets = batch.targets.rows(k * rows, rows);
  }
  return out;
}

ParallelPlan strategies_of(const PlanLayout& layout) {
  ParallelPlan plan;
  for (auto& [plugin, axes] : plugin_axes(layout.mesh)) {
    std::unique_ptr<Strategy> strategy;
    if (plugin == "pp") strategy = std::make_unique<PpStrategy>(layout.pp);
    if (plugin == "fsdp") strategy = std::make_unique<FsdpStrategy>(layout.fsdp);
    if (plugin == "tp") strategy = std::make_unique<TpStrategy>(layout.tp);
    MT_CHECK(strategy != nullptr, "the planner knows the built-in plugins; '", plugin,
             "' serves an axis of ", layout.mesh.to_string());
    plan.add(std::move(strategy), std::move(axes));
  }
  return plan;
}

PlanLayout plan_layout(const TrainConfig& config) {
  PlanLayout layout{.mesh = config.effective_mesh(), .ac = config.ac};
  for (const BoundStrategy& bound : bind_strategies(config)) {
    const Strategy* s = bound.strategy.get();
    if (const auto* fsdp = dynamic_cast<const FsdpStrategy*>(s)) {
      layout.fsdp = fsdp->options();
    } else if (const auto* tp = dynamic_cast<const TpStrategy*>(s)) {
      layout.tp = tp->options();
    } else if (const auto* pp = dynamic_cast<const PpStrategy*>(s)) {
      layout.pp = pp->options();
    } else {
      std::string axes;
      for (const std::string& axis : bound.axes) axes += (axes.empty() ? "" : ",") + axis;
      throw InvalidArgument(
          detail::concat("the planner knows the built-in plugins (fsdp, tp, pp); the axes ", axes,
                         " are served by plugin '", bound.plugin, "'"));
    }
  }
  return layout;
}

Workload plan_workload(const TrainConfig& config) {
  return {.batch = config.batch,
          .seq = config.seq,
          .micro_batches = static_cast<int>(config.grad_accum)};
}

}  // namespace meshtrain
