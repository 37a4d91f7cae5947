// Write your own parallelism plugin: replicated data parallelism (PyTorch DDP's semantics) as a
// strategy of the user's, registered by name beside the built-ins, bound to the dp_replicate axis
// and composed with the built-in tensor parallelism on tp. It must reproduce the single-rank run.
//
// A strategy is applied once per plan and changes what it owns: here it keeps every parameter
// whole on each rank (WholeParameters, what the optimizer steps) and adds a hook that sums the
// gradients over its axis when backward has finished. The program then runs meshtrain's own
// command line with its registry, so that a configuration file reaches the plugin by name.
#include <unistd.h>

#include <meshtrain/cli/command_line.h>
#include <meshtrain/core/comm/communicator.h>
#include <meshtrain/core/comm/local/spawn_ranks.h>
#include <meshtrain/core/comm/work.h>
#include <meshtrain/core/error.h>
#include <meshtrain/mesh/device_mesh.h>
#include <meshtrain/models/adamw.h>
#include <meshtrain/models/builtin_models.h>
#include <meshtrain/models/gpt2.h>
#include <meshtrain/models/gpt2_init.h>
#include <meshtrain/models/token_batches.h>
#include <meshtrain/parallel/grad_norm.h>
#include <meshtrain/parallel/parallel_plan.h>
#include <meshtrain/plugins/builtin_strategies.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

using namespace meshtrain;

namespace {

// Sums every trainable parameter's gradient over one communicator once all micro-batches have
// run backward. One all-reduce per gradient, all in flight together; or, fused, one all-reduce of
// a flat copy of them all (DDP's buckets, as one bucket): fewer, larger messages.
class AllReduceGradients : public StepHooks {
 public:
  AllReduceGradients(Model& model, Communicator& comm, bool fused)
      : model_(model), comm_(comm), fused_(fused) {}
  void finish_backward() override {
    std::vector<Tensor> grads;
    for (Parameter* p : model_.parameters())
      if (p->requires_grad()) grads.push_back(p->grad());
    if (!fused_) {
      std::vector<WorkPtr> pending;
      for (const Tensor& g : grads) pending.push_back(comm_.all_reduce(g, ReduceOp::sum));
      for (const WorkPtr& work : pending) work->wait();
      return;
    }
    int64_t total = 0;
    for (const Tensor& g : grads) total += g.numel();
    const Tensor flat = Tensor::empty({total}, DType::f32, grads.front().device());
    int64_t at = 0;
    for (const Tensor& g : grads) {
      flat.view(at, {g.numel()}).copy_from(g);
      at += g.numel();
    }
    comm_.all_reduce(flat, ReduceOp::sum)->wait();
    at = 0;
    for (const Tensor& g : grads) {
      g.copy_from(flat.view(at, {g.numel()}));
      at += g.numel();
    }
  }

 private:
  Model& model_;
  Communicator& comm_;
  bool fused_;
};

class ReplicatedDataParallel : public Strategy {
 public:
  explicit ReplicatedDataParallel(bool fused) : fused_(fused) {}
  std::string name() const override { return "ddp"; }
  StrategyKind kind() const override { return StrategyKind::data; }
  void apply(ParallelContext& ctx, const std::vector<std::string>& axes) override {
    MT_CHECK(axes.size() == 1, "ddp is bound to one data axis, got ", axes.size());
    // Every rank's loss is scaled by 1 / the global batch's tokens, so summing the replicas'
    // gradients gives the global batch's gradient.
    ctx.state = std::make_unique<WholeParameters>(*ctx.model, ctx.mesh, ctx.values);
    hooks_ = std::make_unique<AllReduceGradients>(*ctx.model, ctx.mesh.comm(axes[0]), fused_);
    ctx.hooks.push_back(hooks_.get());
  }

 private:
  bool fused_;
  std::unique_ptr<AllReduceGradients> hooks_;  // the plan owns the strategy, the strategy its hook
};

// The built-in plugins and ours, as a configuration file or command line would reach them. A
// plugin declares its options (here one, typed and checked by the registry before the factory
// runs); the command line builds its flags from such declarations.
StrategyRegistry strategies() {
  StrategyRegistry registry = builtin_strategies();
  registry.add(PluginInfo{
      .name = "ddp",
      .help = "replicated data parallelism: whole parameters, gradients all-reduced",
      .options = {{.name = "fused", .type = OptionSpec::Type::boolean,
                   .help = "one all-reduce of all gradients rather than one per gradient",
                   .default_value = "false"}},
      .factory = [](const OptionValues& options) -> std::unique_ptr<Strategy> {
        return std::make_unique<ReplicatedDataParallel>(options.boolean("fused"));
      }});
  return registry;
}

constexpr int kSteps = 5;
constexpr int64_t kBatch = 4, kSeq = 16;

std::vector<Token> training_tokens(int64_t vocab) {
  std::vector<Token> tokens(4096);
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = static_cast<Token>((i * 7 + i / 13) % vocab);
  return tokens;
}

// A plugin by name, the axis it serves and its options as text (a config file's or flags').
struct Binding {
  std::string plugin;
  std::string axis;
  TextOptions options;
};

std::vector<double> train(int world, const std::vector<MeshAxis>& axes,
                          const std::vector<Binding>& bindings) {
  std::vector<double> losses;
  spawn_ranks(world, [&](RankContext& ctx) {
    DeviceMesh mesh(ctx.world, axes);
    const GPT2Config config = gpt2_preset("tiny");
    GPT2 model(config, GPT2Options{.materialize = false});
    const Gpt2InitValues init(config, /*seed=*/7);
    const StrategyRegistry registry = strategies();
    ParallelPlan plan;
    for (const Binding& b : bindings) plan.add(registry.create(b.plugin, b.options), {b.axis});
    ParallelModel pm = plan.apply(mesh, model, &init);

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
    if (ctx.rank == 0 && world > 1) {
      const CommCounters& sent = mesh.comm("dp_replicate").counters();
      std::printf("%s: rank 0 sent %llu bytes in %llu all-reduces on dp_replicate over %d steps\n",
                  plan.describe().c_str(), static_cast<unsigned long long>(sent.total_sent()),
                  static_cast<unsigned long long>(sent.count(CommOp::all_reduce)), kSteps);
    }
  });
  return losses;
}

// The plugin by name from a configuration file, as `meshtrain train --config` reads it: this
// program's command line is meshtrain's, run with its registry (meshtrain/cli/command_line.h).
// `[mesh] axis_plugins` binds ddp to dp_replicate, `[ddp]` holds its declared option.
int meshtrain_command(const std::vector<std::string>& args) {
  const Registries registries{builtin_models(), strategies()};
  std::vector<const char*> argv{"custom_strategy"};
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  return run_command_line(static_cast<int>(argv.size()), argv.data(), registries);
}

std::vector<double> metrics_losses(const std::string& path) {
  std::vector<double> losses;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);)
    losses.push_back(std::strtod(line.c_str() + line.find("\"loss\":") + 7, nullptr));
  return losses;
}

bool trains_from_a_config_file() {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("meshtrain_custom_strategy_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string text = (dir / "corpus.txt").string(), tokens = (dir / "tokens.bin").string();
  {
    std::ofstream corpus(text);
    for (int i = 0; i < 100; ++i)
      corpus << "A user's plugin, bound to a mesh axis by a configuration file.\n";
  }
  if (meshtrain_command({"prepare", text, tokens}) != 0) return false;
  const std::string config = (dir / "ddp.toml").string();
  std::ofstream(config) << "[model]\npreset = \"tiny\"\nvocab = 256\n\n"
                        << "[data]\npath = \"" << tokens << "\"\n\n"
                        << "[training]\nsteps = " << kSteps << "\nbatch = " << kBatch
                        << "\nseq = " << kSeq << "\n\n"
                        << "[mesh]\nworld = 4\nlayout = \"dp_replicate=2,tp=2\"\n"
                        << "axis_plugins = \"dp_replicate=ddp\"\n\n"
                        << "[ddp]\nfused = true\n\n"
                        << "[output]\nsample = 0\nquiet = true\n";
  const std::string parallel = (dir / "ddp.jsonl").string(), one = (dir / "one.jsonl").string();
  if (meshtrain_command({"train", "--config", config, "--metrics", parallel}) != 0 ||
      meshtrain_command({"train", "--config", config, "--world", "1", "--mesh",
                         "dp_replicate=1,tp=1", "--metrics", one}) != 0)
    return false;
  const std::vector<double> losses = metrics_losses(parallel), reference = metrics_losses(one);
  bool match = losses.size() == size_t{kSteps} && reference.size() == size_t{kSteps};
  for (size_t s = 0; match && s < losses.size(); ++s)
    match = std::abs(losses[s] - reference[s]) <= 1e-5 * reference[s];
  std::printf("%s through meshtrain's command line: loss %.4f -> %.4f, %s one rank's\n",
              config.c_str(), losses.empty() ? 0.0 : losses.front(),
              losses.empty() ? 0.0 : losses.back(), match ? "matches" : "MISMATCH with");
  std::filesystem::remove_all(dir);
  return match;
}

}  // namespace

int main() {
  std::printf("plugins: ");
  for (const std::string& name : strategies().names()) std::printf("%s ", name.c_str());
  std::printf("\n");

  const std::vector<double> reference = train(1, {{"dp_replicate", 1}, {"tp", 1}}, {});
  bool all_match = true;
  for (const char* fused : {"false", "true"}) {
    const std::vector<double> parallel = train(
        4, {{"dp_replicate", 2}, {"tp", 2}},
        {{"ddp", "dp_replicate", {{"fused", fused}}}, {"tp", "tp", {}}});
    double worst = 0.0;
    for (int s = 0; s < kSteps; ++s)
      worst = std::max(worst, std::abs(parallel[s] - reference[s]) / reference[s]);
    const bool match = worst < 1e-5;
    all_match = all_match && match;
    std::printf("ddp (fused=%s) x tp: loss %.4f -> %.4f, largest relative difference from one "
                "rank %.1e: %s\n", fused, parallel.front(), parallel.back(), worst,
                match ? "matches" : "MISMATCH");
  }
  all_match = trains_from_a_config_file() && all_match;
  return all_match ? 0 : 1;
}
