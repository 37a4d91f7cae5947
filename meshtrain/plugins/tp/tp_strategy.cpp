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

void register_tp(StrategyRegistry& registry) {
  registry.add("tp", [](const StrategyOptions& given) {
    TpOptions options;
    for (const auto& [key, value] : given) {
      MT_CHECK(key == "sequence_parallel", "unknown tp option '", key,
               "'; known: sequence_parallel");
      options.sequence_parallel = parse_bool_option("tp", key, value);
    }
    return std::make_unique<TpStrategy>(options);
  });
}

}  // namespace meshtrain
