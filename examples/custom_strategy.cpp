// Write your own parallelism plugin: replicated data parallelism (PyTorch DDP's semantics) as a
// strategy of the user's, registered by name beside the built-ins, bound to the dp_replicate axis
// and composed with the built-in tensor parallelism on tp. It must reproduce the single-rank run.
//
// A strategy is applied once per plan and changes what it owns: here it keeps every parameter
// whole on each rank (WholeParameters, what the optimizer steps) and adds a hook that sums the
// gradients over its axis when backward has finished.
#include <meshtrain/core/comm/communicator.h>
#include <meshtrain/core/comm/local/spawn_ranks.h>
#include <meshtrain/core/comm/work.h>
#include <meshtrain/core/error.h>
#include <meshtrain/mesh/device_mesh.h>
#include <meshtrain/models/adamw.h>
#include <meshtrain/models/gpt2.h>
#include <meshtrain/models/gpt2_init.h>
#include <meshtrain/models/token_batches.h>
#include <meshtrain/parallel/grad_norm.h>
#include <meshtrain/parallel/parallel_plan.h>
#include <meshtrain/plugins/builtin_strategies.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

using namespace meshtrain;

namespace {

// Sums every trainable parameter's gradient over one communicator once all micro-batches have
// run backward: all the all-reduces are started, then waited for, so they overlap each other.
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
    MT_CHECK(axes.size() == 1, "ddp is bound to one data axis, got ", axes.size());
    // Every rank's loss is scaled by 1 / the global batch's tokens, so summing the replicas'
    // gradients gives the global batch's gradient.
    ctx.state = std::make_unique<WholeParameters>(*ctx.model, ctx.mesh, ctx.values);
    hooks_ = std::make_unique<AllReduceGradients>(*ctx.model, ctx.mesh.comm(axes[0]));
    ctx.hooks.push_back(hooks_.get());
  }

 private:
  std::unique_ptr<AllReduceGradients> hooks_;  // the plan owns the strategy, the strategy its hook
};

// The built-in plugins and ours, as a configuration file or command line would reach them.
StrategyRegistry strategies() {
  StrategyRegistry registry = builtin_strategies();
  registry.add("ddp", [](const StrategyOptions& options) -> std::unique_ptr<Strategy> {
    MT_CHECK(options.empty(), "ddp takes no options, got '", options.begin()->first, "'");
    return std::make_unique<ReplicatedDataParallel>();
  });
  return registry;
}

constexpr int kSteps = 5;
constexpr int64_t kBatch = 4, kSeq = 16;

std::vector<uint16_t> training_tokens(int64_t vocab) {
  std::vector<uint16_t> tokens(4096);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<uint16_t>((i * 7 + i / 13) % vocab);
  return tokens;
}

// `bindings`: plugin name and the axis it serves.
std::vector<double> train(int world, const std::vector<MeshAxis>& axes,
                          const std::vector<std::pair<std::string, std::string>>& bindings) {
  std::vector<double> losses;
  spawn_ranks(world, [&](RankContext& ctx) {
    DeviceMesh mesh(ctx.world, axes);
    const GPT2Config config = gpt2_preset("tiny");
    GPT2 model(config, GPT2Options{.materialize = false});
    const Gpt2InitValues init(config, /*seed=*/7);
    const StrategyRegistry registry = strategies();
    ParallelPlan plan;
    for (const auto& [plugin, axis] : bindings) plan.add(registry.create(plugin, {}), {axis});
    ParallelModel pm = plan.apply(mesh, model, &init);
    if (ctx.rank == 0 && world > 1) std::printf("plan: %s\n", plan.describe().c_str());

    TokenBatches batches(training_tokens(config.vocab), config.vocab, kBatch, kSeq,
                         mesh.axis_size("dp"), mesh.axis_rank("dp"));
    AdamW optimizer;
    for (int step = 0; step < kSteps; ++step) {
      std::vector<MicroBatch> micro_batches{batches.batch(step).micro_batch()};
      const double loss = pm.runner->run(micro_batches, double(kBatch * kSeq));
      const std::vector<OptimizerSlot> slots = pm.state->optimizer_slots();
      clip_grads(slots, global_grad_norm(slots, mesh), 1.0f);
      optimizer.step(slots, 1e-3f);
      pm.state->zero_grad();
      if (ctx.rank == 0) losses.push_back(loss);
    }
    if (ctx.rank == 0 && world > 1)
      std::printf("ddp sent %llu bytes from rank 0 on dp_replicate over %d steps\n",
                  static_cast<unsigned long long>(mesh.comm("dp_replicate").counters().total_sent()),
                  kSteps);
  });
  return losses;
}

}  // namespace

int main() {
  std::printf("plugins: ");
  for (const std::string& name : strategies().names()) std::printf("%s ", name.c_str());
  std::printf("\n");

  const std::vector<double> reference = train(1, {{"dp_replicate", 1}, {"tp", 1}}, {});
  const std::vector<double> parallel =
      train(4, {{"dp_replicate", 2}, {"tp", 2}}, {{"ddp", "dp_replicate"}, {"tp", "tp"}});
  double worst = 0.0;
  for (int s = 0; s < kSteps; ++s) {
    const double diff = std::abs(parallel[s] - reference[s]) / reference[s];
    worst = std::max(worst, diff);
    std::printf("step %d  one rank %.5f  ddp x tp %.5f\n", s + 1, reference[s], parallel[s]);
  }
  const bool match = worst < 1e-5;
  std::printf("largest relative loss difference %.1e: %s\n", worst, match ? "matches" : "MISMATCH");
  return match ? 0 : 1;
}
