#include "meshtrain/plugins/fsdp/fsdp_strategy.h"

#include <algorithm>

#include "meshtrain/core/error.h"
#include "meshtrain/mesh/axis_names.h"
#include "meshtrain/mesh/device_mesh.h"

namespace meshtrain {

namespace {

bool binds(const std::vector<std::string>& axes, std::string_view axis) {
  return std::find(axes.begin(), axes.end(), axis) != axes.end() ||
         std::find(axes.begin(), axes.end(), mesh_axis::dp) != axes.end();
}

Communicator* group_or_null(Communicator& comm) { return comm.size() > 1 ? &comm : nullptr; }

FsdpGroups resolve_groups(DeviceMesh& mesh, const std::vector<std::string>& axes, FsdpMode mode) {
  for (const std::string& axis : axes)
    MT_CHECK(axis == mesh_axis::dp_shard || axis == mesh_axis::dp_replicate || axis == mesh_axis::dp,
             "fsdp binds to the data axes dp_shard, dp_replicate or dp, got '", axis, "'");
  for (std::string_view axis : {mesh_axis::dp_replicate, mesh_axis::dp_shard})
    MT_CHECK(!mesh.has_axis(axis) || mesh.axis_size(axis) == 1 || binds(axes, axis),
             "mesh axis ", axis, " (size ", mesh.has_axis(axis) ? mesh.axis_size(axis) : 1,
             ") is not bound to fsdp; bind every data axis",
             axis == mesh_axis::dp_replicate ? " (or use mode hybrid)" : "");
  const std::string bound_axis = axes.size() == 1 ? axes[0] : std::string(mesh_axis::dp);
  Communicator& bound = mesh.comm(bound_axis);
  switch (mode) {
    case FsdpMode::full:
    case FsdpMode::grad_op: return {group_or_null(bound), nullptr, bound_axis};
    case FsdpMode::none: return {nullptr, group_or_null(bound), ""};
    case FsdpMode::hybrid:
      MT_CHECK(mesh.has_axis(mesh_axis::dp_shard) && mesh.has_axis(mesh_axis::dp_replicate) &&
                   binds(axes, mesh_axis::dp_shard) && binds(axes, mesh_axis::dp_replicate),
               "fsdp mode hybrid needs a mesh with dp_replicate and dp_shard, both bound; mesh is ",
               mesh.layout().to_string());
      return {group_or_null(mesh.comm(mesh_axis::dp_shard)),
              group_or_null(mesh.comm(mesh_axis::dp_replicate)), std::string(mesh_axis::dp_shard)};
  }
  throw InvalidArgument("unknown FSDP mode");
}

DType parse_float_dtype(const std::string& key, const std::string& value) {
  MT_CHECK(value == "f32" || value == "bf16", "fsdp ", key, ": expected f32 or bf16, got '", value,
           "'");
  return parse_dtype(value);
}

}  // namespace

FsdpStrategy::FsdpStrategy(FsdpOptions options) : options_(options) {
  MT_CHECK_GE(options_.prefetch, 0, "fsdp prefetch must be at least 0");
  MT_CHECK(options_.param_dtype != DType::i32 && options_.reduce_dtype != DType::i32,
           "fsdp param and reduce dtypes must be f32 or bf16");
  MT_CHECK(!options_.reshard_after_forward.value_or(false) || options_.mode == FsdpMode::full ||
               options_.mode == FsdpMode::hybrid,
           "fsdp reshard_after_forward=true needs mode full or hybrid: mode ",
           fsdp_mode_name(options_.mode),
           options_.mode == FsdpMode::grad_op
               ? " keeps the parameters unsharded after forward by definition (ZeRO-2); ask for "
                 "mode full"
               : " never shards the parameters");
}

void FsdpStrategy::apply(ParallelContext& ctx, const std::vector<std::string>& axes) {
  MT_CHECK(!runtime_, "fsdp is applied once");
  const FsdpGroups groups = resolve_groups(ctx.mesh, axes, options_.mode);
  if (options_.unit_policy) ctx.unit_specs = options_.unit_policy(*ctx.model);
  const UnitPlan plan = make_unit_plan(*ctx.model, ctx.unit_specs);
  const bool pipelined = ctx.pipelined;
  const bool reshard = options_.reshard_after_forward.value_or(
      (options_.mode == FsdpMode::full || options_.mode == FsdpMode::hybrid) && !pipelined);
  MT_CHECK(!pipelined || options_.grad_sync.value_or(GradSync::last_micro_batch) ==
                             GradSync::last_micro_batch,
           "fsdp grad_sync every cannot be honoured under pipeline parallelism: a schedule "
           "interleaves micro-batches, so each unit reduces its gradients once, on its last "
           "backward of the step; drop the option or ask for last");
  ctx.compute_dtype = options_.param_dtype;
  std::vector<std::unique_ptr<FsdpUnit>> units;
  for (int u = 0; u < static_cast<int>(plan.units.size()); ++u) {
    FsdpUnitConfig config;
    config.groups = groups;
    config.param_dtype = options_.param_dtype;
    config.reduce_dtype = options_.reduce_dtype;
    config.offload = options_.offload;
    // A pipeline schedule interleaves micro-batches (and splits backward): gradients are reduced
    // once, on each unit's last backward of the step, as torchtitan does.
    config.grad_sync = pipelined ? GradSync::last_micro_batch
                                 : options_.grad_sync.value_or(GradSync::every_micro_batch);
    config.reshard_after_forward =
        reshard && (!plan.units[u].root || options_.reshard_root_after_forward);
    units.push_back(
        std::make_unique<FsdpUnit>(plan.units[u].name, plan.units[u].params, config,
                                   ShardValues{ctx.values, ctx.mesh.layout(), ctx.mesh.rank()}));
  }
  runtime_ = std::make_unique<FsdpRuntime>(plan, std::move(units), groups, options_.prefetch,
                                           pipelined);
  ctx.hooks.push_back(runtime_.get());
  ctx.state = std::make_unique<FsdpTrainableState>(*runtime_);
}

const FsdpRuntime& FsdpStrategy::runtime() const {
  MT_CHECK(runtime_ != nullptr, "fsdp has not been applied yet");
  return *runtime_;
}

CommCounters FsdpStrategy::counters() const {
  CommCounters total;
  const FsdpGroups& g = runtime().groups();
  if (g.shard) total += g.shard->counters();
  if (g.replicate) total += g.replicate->counters();
  return total;
}

void register_fsdp(StrategyRegistry& registry) {
  registry.add("fsdp", [](const StrategyOptions& given) {
    FsdpOptions options;
    for (const auto& [key, value] : given) {
      if (key == "mode") {
        options.mode = parse_fsdp_mode(value);
      } else if (key == "prefetch") {
        options.prefetch = parse_int_option("fsdp", key, value, 0);
      } else if (key == "param_dtype") {
        options.param_dtype = parse_float_dtype(key, value);
      } else if (key == "reduce_dtype") {
        options.reduce_dtype = parse_float_dtype(key, value);
      } else if (key == "grad_sync") {
        options.grad_sync = parse_grad_sync(value);
      } else if (key == "blocks_per_unit") {
        options.unit_policy = group_units_policy(parse_int_option("fsdp", key, value, 1));
      } else if (key == "reshard_after_forward") {
        options.reshard_after_forward = parse_bool_option("fsdp", key, value);
      } else if (key == "offload") {
        options.offload = parse_bool_option("fsdp", key, value);
      } else if (key == "reshard_root") {
        options.reshard_root_after_forward = parse_bool_option("fsdp", key, value);
      } else {
        throw InvalidArgument(detail::concat(
            "unknown fsdp option '", key,
            "'; known: mode, prefetch, param_dtype, reduce_dtype, grad_sync, blocks_per_unit, "
            "reshard_after_forward, reshard_root, offload"));
      }
    }
    return std::make_unique<FsdpStrategy>(options);
  });
}

}  // namespace meshtrain
