#include "meshtrain/parallel/parallel_plan.h"

#include <algorithm>
#include <optional>
#include <set>

#include "meshtrain/core/error.h"
#include "meshtrain/mesh/device_mesh.h"

namespace meshtrain {

ParallelPlan& ParallelPlan::add(std::unique_ptr<Strategy> strategy, std::vector<std::string> axes) {
  MT_CHECK(strategy != nullptr, "ParallelPlan::add(nullptr)");
  MT_CHECK(!axes.empty(), "strategy '", strategy->name(), "' must be bound to at least one axis");
  for (const Binding& b : bindings_) {
    MT_CHECK(b.strategy->name() != strategy->name(), "strategy '", strategy->name(),
             "' is bound twice");
    for (const std::string& axis : axes)
      MT_CHECK(std::find(b.axes.begin(), b.axes.end(), axis) == b.axes.end(), "axis '", axis,
               "' is bound to both '", b.strategy->name(), "' and '", strategy->name(), "'");
  }
  bindings_.push_back({std::move(strategy), std::move(axes)});
  return *this;
}

ParallelModel ParallelPlan::apply(DeviceMesh& mesh, Model& model,
                                  const ParameterSource* values) {
  MT_CHECK(!applied_, "a ParallelPlan applies once");
  for (const Binding& b : bindings_)
    for (const std::string& axis : b.axes)
      MT_CHECK(mesh.has_axis(axis), "strategy '", b.strategy->name(), "' is bound to axis '",
               axis, "' but the mesh is ", mesh.layout().to_string());
  for (const MeshAxis& axis : mesh.layout().axes()) {
    const bool bound = std::any_of(bindings_.begin(), bindings_.end(), [&](const Binding& b) {
      return std::any_of(b.axes.begin(), b.axes.end(), [&](const std::string& name) {
        const std::vector<std::string> spanned = mesh.layout().span(name);
        return std::find(spanned.begin(), spanned.end(), axis.name) != spanned.end();
      });
    });
    MT_CHECK(axis.size == 1 || bound, "mesh axis ", axis.name, "=", axis.size,
             " is bound to no strategy; add its plugin to the plan (tp: 'tp', data axes: 'fsdp', "
             "pp: 'pp')");
  }
  applied_ = true;

  std::vector<Binding*> order;
  for (Binding& b : bindings_) order.push_back(&b);
  std::stable_sort(order.begin(), order.end(), [](const Binding* a, const Binding* b) {
    return a->strategy->kind() < b->strategy->kind();
  });

  for (Binding* b : order) b->strategy->check_model(model, mesh.layout(), b->axes);
  std::optional<MaterializedValues> materialized;
  if (!values) values = &materialized.emplace(model);
  ParallelContext ctx{mesh, *values, &model, model.default_units(), {}, nullptr, {}};
  for (Binding* b : order) b->strategy->apply(ctx, b->axes);
  // Without a data-parallel strategy the optimizer steps the (possibly narrowed) model's
  // parameters whole.
  if (!ctx.state) ctx.state = std::make_unique<WholeParameters>(*ctx.model, mesh, *values);

  ParallelModel result;
  result.engine = std::make_unique<Engine>(*ctx.model, make_unit_plan(*ctx.model, ctx.unit_specs));
  for (StepHooks* h : ctx.hooks) result.engine->add_hooks(h);
  result.state = std::move(ctx.state);
  result.compute_dtype = ctx.compute_dtype;
  result.runner = ctx.make_runner
                      ? ctx.make_runner(*result.engine, *result.state, mesh, ctx.compute_dtype)
                      : std::make_unique<StepRunner>(*result.engine, mesh);
  return result;
}

std::string ParallelPlan::describe() const {
  std::vector<const Binding*> order;
  for (const Binding& b : bindings_) order.push_back(&b);
  std::stable_sort(order.begin(), order.end(), [](const Binding* a, const Binding* b) {
    return a->strategy->kind() < b->strategy->kind();
  });
  std::string out;
  for (const Binding* b : order) {
    if (!out.empty()) out += ' ';
    out += b->strategy->name() + "[";
    for (size_t i = 0; i < b->axes.size(); ++i) out += (i ? "," : "") + b->axes[i];
    out += ']';
  }
  return out.empty() ? "(no strategies)" : out;
}

Strategy* ParallelPlan::find(std::string_view name) const {
  for (const Binding& b : bindings_)
    if (b.strategy->name() == name) return b.strategy.get();
  return nullptr;
}

}  // namespace meshtrain
