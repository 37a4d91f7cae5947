#include "meshtrain/plugins/tp/tp_strategy.h"

#include <algorithm>

#include "meshtrain/core/comm/gather_values.h"
#include "meshtrain/core/error.h"
#include "meshtrain/mesh/axis_names.h"
#include "meshtrain/mesh/device_mesh.h"

namespace meshtrain {

namespace {
// A rule that matches no module is a mistake in the model's plan: a misspelt pattern would leave
// the blocks it meant replicated, without a word. Under pipeline parallelism a rank holds only its
// stages, so a rule counts as matched when it matched on any stage.
void require_every_rule_matches(const ParallelContext& ctx, const std::vector<nn::TpRule>& plan,
                                std::vector<uint64_t> matches,
                                const std::vector<nn::NamedModule>& modules) {
  if (ctx.mesh.has_axis(mesh_axis::pp) && ctx.mesh.axis_size(mesh_axis::pp) > 1) {
    Communicator& pp = ctx.mesh.comm(mesh_axis::pp);
    const std::vector<uint64_t> every_stage = all_gather_values(pp, matches);
    for (size_t r = 0; r < plan.size(); ++r)
      for (int stage = 0; stage < pp.size(); ++stage)
        matches[r] = std::max(matches[r], every_stage[stage * plan.size() + r]);
  }
  for (size_t r = 0; r < plan.size(); ++r) {
    if (matches[r] > 0) continue;
    std::string names;
    for (const nn::NamedModule& m : modules) names += (names.empty() ? "" : ", ") + m.name;
    throw InvalidArgument(detail::concat(
        "tp: the model's tensor-parallel rule '", plan[r].pattern, "' (style ",
        nn::tp_style_name(plan[r].style), ") matches no module; this rank's modules are: ", names,
        " ('*' matches one dot-free part of a name)"));
  }
}
}  // namespace

void TpStrategy::apply(ParallelContext& ctx, const std::vector<std::string>& axes) {
  MT_CHECK(axes.size() == 1 && axes[0] == mesh_axis::tp, "tp binds to the mesh axis '",
           mesh_axis::tp, "' alone");
  const std::vector<nn::TpRule> plan = ctx.model->tensor_parallel_plan();
  MT_CHECK(!plan.empty(), "tensor parallelism needs the model's tensor-parallel plan; this model "
           "has none");
  Communicator& comm = ctx.mesh.comm(mesh_axis::tp);
  nn::TpSetup setup{ctx.mesh.layout(), ctx.mesh.rank(),
                    nn::TensorParallel{comm.size() > 1 ? &comm : nullptr,
                                       options_.sequence_parallel}};
  const std::vector<nn::NamedModule> modules = ctx.model->modules();
  std::vector<uint64_t> matches(plan.size(), 0);
  for (size_t r = 0; r < plan.size(); ++r) {
    const nn::TpRule& rule = plan[r];
    for (const nn::NamedModule& m : modules) {
      if (!nn::matches_pattern(rule.pattern, m.name)) continue;
      ++matches[r];
      try {
        m.module->parallelize(rule.style, setup);
      } catch (const InvalidArgument& e) {
        throw InvalidArgument(detail::concat("tp: module '", m.name, "' (style ",
                                             nn::tp_style_name(rule.style), "): ", e.what()));
      }
    }
  }
  require_every_rule_matches(ctx, plan, matches, modules);
}

void TpStrategy::check_plan(const PlannedRun& run) const {
  const int64_t tp = run.mesh.axis_size(mesh_axis::tp);
  MT_CHECK(!options_.sequence_parallel || run.micro_batch_tokens % tp == 0,
           "sequence parallelism (--sequence-parallel) splits each micro-batch's ",
           run.micro_batch_tokens, " token rows (", run.micro_batch_tokens_origin, ") over tp=", tp,
           "; choose sizes whose token rows divide by tp");
}

ModelStateShare TpStrategy::model_state_share(const MeshLayout& mesh,
                                              const std::vector<std::string>& /*axes*/) const {
  return {1.0 / mesh.axis_size(mesh_axis::tp)};  // the replicated norms and biases are small
}

void register_tp(StrategyRegistry& registry) {
  registry.add(PluginInfo{
      .name = "tp",
      .help = "Megatron-LM tensor parallelism on the tp axis, by the model's tensor-parallel plan",
      .options = {{.name = "sequence_parallel", .type = OptionSpec::Type::boolean,
                   .help = "with sequence parallelism (Korthikanti et al. 2022)",
                   .default_value = "false", .flag = "--sequence-parallel",
                   .switch_flag = true}},
      .factory = [](const OptionValues& given) -> std::unique_ptr<Strategy> {
        return std::make_unique<TpStrategy>(
            TpOptions{.sequence_parallel = given.boolean("sequence_parallel")});
      }});
}

}  // namespace meshtrain
