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

}  // namespace

FsdpStrategy::FsdpStrategy(FsdpOptions options) : options_(options) {
  MT_CHECK(options_.prefetch >= 0, "fsdp prefetch must be at least 0, got ", options_.prefetch);
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

ModelStateShare FsdpStrategy::model_state_share(const MeshLayout& mesh,
                                                const std::vector<std::string>& axes) const {
  int sharded_over = 1;  // full and grad_op shard over every bound axis, hybrid over dp_shard
  for (const std::string& axis : axes)
    for (const std::string& spanned : mesh.span(axis))
      if (options_.mode != FsdpMode::none &&
          (options_.mode != FsdpMode::hybrid || spanned == mesh_axis::dp_shard))
        sharded_over *= mesh.axis_size(spanned);
  return {1.0 / sharded_over, options_.offload};
}

void register_fsdp(StrategyRegistry& registry) {
  using Type = OptionSpec::Type;
  registry.add(PluginInfo{
      .name = "fsdp",
      .help = "fully sharded data parallelism (ZeRO-3, FSDP2 semantics) on the data axes",
      .options =
          {{.name = "mode", .type = Type::choice, .help = "FSDP mode",
            .default_value = "full", .choices = {"full", "grad_op", "none", "hybrid"},
            .flag = "--fsdp"},
           {.name = "prefetch", .type = Type::integer, .help = "all-gathers in flight",
            .default_value = "2", .minimum = 0, .flag = "--prefetch"},
           {.name = "param_dtype", .type = Type::choice, .help = "all-gather (compute) dtype",
            .default_value = "f32", .choices = {"f32", "bf16"}, .flag = "--param-dtype"},
           {.name = "reduce_dtype", .type = Type::choice, .help = "gradient reduction dtype",
            .default_value = "f32", .choices = {"f32", "bf16"}, .flag = "--reduce-dtype"},
           {.name = "grad_sync", .type = Type::choice,
            .help = "reduce gradients every micro-batch or on the last one (default: every; "
                    "under pipeline parallelism always the last)",
            .choices = {"every", "last"}, .flag = "--grad-sync"},
           {.name = "reshard_after_forward", .type = Type::boolean,
            .help = "free blocks' parameters after forward (default: true for full and hybrid, "
                    "false under pipeline parallelism)",
            .flag = "--reshard-after-forward"},
           {.name = "reshard_root", .type = Type::boolean,
            .help = "free the root unit's parameters after forward too",
            .default_value = "false"},
           {.name = "blocks_per_unit", .type = Type::integer,
            .help = "consecutive blocks gathered as one unit", .default_value = "1",
            .minimum = 1},
           {.name = "offload", .type = Type::boolean,
            .help = "CPU offload: master shards, gradient shards and AdamW state in host memory, "
                    "the optimizer step on the CPU (FSDP2's CPUOffloadPolicy)",
            .default_value = "false", .flag = "--offload", .switch_flag = true}},
      .factory = [](const OptionValues& given) -> std::unique_ptr<Strategy> {
        FsdpOptions options;
        options.mode = parse_fsdp_mode(given.text("mode"));
        options.prefetch = given.integer("prefetch");
        options.param_dtype = parse_dtype(given.text("param_dtype"));
        options.reduce_dtype = parse_dtype(given.text("reduce_dtype"));
        if (given.given("grad_sync")) options.grad_sync = parse_grad_sync(given.text("grad_sync"));
        if (given.given("reshard_after_forward"))
          options.reshard_after_forward = given.boolean("reshard_after_forward");
        options.reshard_root_after_forward = given.boolean("reshard_root");
        if (given.integer("blocks_per_unit") > 1)
          options.unit_policy = group_units_policy(given.integer("blocks_per_unit"));
        options.offload = given.boolean("offload");
        return std::make_unique<FsdpStrategy>(options);
      }});
}

}  // namespace meshtrain
