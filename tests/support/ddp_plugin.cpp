#include "tests/support/ddp_plugin.h"

#include <vector>

#include "meshtrain/core/comm/work.h"
#include "meshtrain/parallel/trainable_state.h"
#include "meshtrain/plugins/builtin_strategies.h"

namespace meshtrain::testing {

namespace {

class AllReduceGradients : public StepHooks {
 public:
  AllReduceGradients(Model& model, Communicator& comm) : model_(model), comm_(comm) {}
  void finish_backward() override {
    std::vector<WorkPtr> pending;
    for (Parameter* p : model_.parameters())
      if (p->requires_grad()) pending.push_back(comm_.all_reduce(p->grad(), ReduceOp::sum));
    for (const WorkPtr& work : pending) work->wait();
  }

 private:
  Model& model_;
  Communicator& comm_;
};

class ReplicatedDataParallel : public Strategy {
 public:
  std::string name() const override { return "ddp"; }
  StrategyKind kind() const override { return StrategyKind::data; }
  void apply(ParallelContext& ctx, const std::vector<std::string>& axes) override {
    ctx.state = std::make_unique<WholeParameters>(*ctx.model, ctx.mesh, ctx.values);
    hooks_ = std::make_unique<AllReduceGradients>(*ctx.model, ctx.mesh.comm(axes.at(0)));
    ctx.hooks.push_back(hooks_.get());
  }

 private:
  std::unique_ptr<AllReduceGradients> hooks_;
};

}  // namespace

std::shared_ptr<const StrategyRegistry> plugins_with_ddp() {
  auto registry = std::make_shared<StrategyRegistry>(builtin_strategies());
  registry->add(PluginInfo{.name = "ddp",
                           .help = "replicated data parallelism",
                           .options = {},
                           .factory = [](const OptionValues&) -> std::unique_ptr<Strategy> {
                             return std::make_unique<ReplicatedDataParallel>();
                           }});
  return registry;
}

}  // namespace meshtrain::testing
