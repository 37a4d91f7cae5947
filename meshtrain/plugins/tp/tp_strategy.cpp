#include "meshtrain/plugins/tp/tp_strategy.h"

#include "meshtrain/core/error.h"
#include "meshtrain/mesh/axis_names.h"
#include "meshtrain/mesh/device_mesh.h"

namespace meshtrain {

void TpStrategy::check_model(Model& model, const MeshLayout& mesh,
                             const std::vector<std::string>& axes) const {
  MT_CHECK(axes.size() == 1 && axes[0] == mesh_axis::tp, "tp binds to the mesh axis '",
           mesh_axis::tp, "' alone");
  const std::vector<nn::TpRule> plan = model.tensor_parallel_plan();
  MT_CHECK(!plan.empty(), "tensor parallelism needs the model's tensor-parallel plan; this model "
           "has none");
  const int tp = mesh.axis_size(mesh_axis::tp);
  const std::vector<nn::NamedModule> modules = model.modules();
  for (const nn::TpRule& rule : plan) {
    bool matched = false;
    for (const nn::NamedModule& m : modules) {
      if (!nn::matches_pattern(rule.pattern, m.name)) continue;
      matched = true;
      try {
        m.module->check_parallel(rule.style, tp);
      } catch (const InvalidArgument& e) {
        throw InvalidArgument(detail::concat("tp: module '", m.name, "' (style ",
                                             nn::tp_style_name(rule.style), "): ", e.what()));
      }
    }
    // A misspelt pattern would leave the blocks it meant replicated, without a word.
    if (!matched) {
      std::string names;
      for (const nn::NamedModule& m : modules) names += (names.empty() ? "" : ", ") + m.name;
      throw InvalidArgument(detail::concat(
          "tp: the model's tensor-parallel rule '", rule.pattern, "' (style ",
          nn::tp_style_name(rule.style), ") matches no module; the modules are: ", names,
          " ('*' matches one dot-free part of a name)"));
    }
  }
}

void TpStrategy::apply(ParallelContext& ctx, const std::vector<std::string>& /*axes*/) {
  Communicator& comm = ctx.mesh.comm(mesh_axis::tp);
  nn::TpSetup setup{ctx.mesh.layout(), ctx.mesh.rank(),
                    nn::TensorParallel{comm.size() > 1 ? &comm : nullptr,
                                       options_.sequence_parallel}};
  // The plan checked the rules on the whole model (check_model); under pipeline parallelism the
  // model here is this rank's stages, so a rule may match nothing on it.
  const std::vector<nn::NamedModule> modules = ctx.model->modules();
  for (const nn::TpRule& rule : ctx.model->tensor_parallel_plan())
    for (const nn::NamedModule& m : modules)
      if (nn::matches_pattern(rule.pattern, m.name)) m.module->parallelize(rule.style, setup);
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
