#include "meshtrain/plugins/tp/tp_strategy.h"

#include "meshtrain/core/error.h"
#include "meshtrain/mesh/axis_names.h"
#include "meshtrain/mesh/device_mesh.h"

namespace meshtrain {

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
  // Under pipeline parallelism the model is this rank's stages, so a rule may match nothing here.
  for (const nn::TpRule& rule : plan) {
    for (const nn::NamedModule& m : modules) {
      if (!nn::matches_pattern(rule.pattern, m.name)) continue;
      try {
        m.module->parallelize(rule.style, setup);
      } catch (const InvalidArgument& e) {
        throw InvalidArgument(detail::concat("tp: module '", m.name, "' (style ",
                                             nn::tp_style_name(rule.style), "): ", e.what()));
      }
    }
  }
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
