// The 3D training loop, complete: GPT-2 on 8 local ranks laid out as pipeline 2 x FSDP 2 x tensor 2,
// then the same model, data and optimizer on one rank; the two must agree step by step.
//
// What a real loop needs and this one shows: each rank fills only its own pieces of the
// parameters from the seed (no rank ever holds the full model), each data rank reads only its
// sequences, a step's batch is cut into micro-batches for the pipeline, the gradient norm is
// global over the mesh before clipping, and one AdamW lives for the whole run (it keeps the moments).
#include <meshtrain/core/comm/local/spawn_ranks.h>
#include <meshtrain/mesh/device_mesh.h>
#include <meshtrain/models/adamw.h>
#include <meshtrain/models/gpt2.h>
#include <meshtrain/models/gpt2_init.h>
#include <meshtrain/models/lr_schedule.h>
#include <meshtrain/models/token_batches.h>
#include <meshtrain/parallel/global_parameters.h>
#include <meshtrain/parallel/grad_norm.h>
#include <meshtrain/parallel/parallel_plan.h>
#include <meshtrain/plugins/fsdp/fsdp_strategy.h>
#include <meshtrain/plugins/pp/pp_strategy.h>
#include <meshtrain/plugins/tp/tp_strategy.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

using namespace meshtrain;

namespace {

constexpr int kSteps = 8;
constexpr int64_t kBatch = 8;  // sequences per step, over all data ranks
constexpr int64_t kSeq = 32;
constexpr int kMicroBatches = 2;  // per data rank and step: what the pipeline streams
constexpr float kClip = 1.0f;

// Byte-level text for the byte-level "demo" GPT-2 (vocabulary 256): words drawn by a fixed
// generator, so that batches do not repeat and the model learns spelling, not positions.
std::vector<Token> training_tokens() {
  const std::vector<std::string> words = {"mesh", "rank", "shard", "gather", "reduce", "scatter",
                                          "pipeline", "stage", "tensor", "parallel", "data",
                                          "axis", "unit", "layer", "gradient", "optimizer"};
  std::vector<Token> tokens;
  uint64_t state = 42;
  while (tokens.size() < 32768) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;  // a 64-bit LCG
    for (const unsigned char c : words[(state >> 33) % words.size()]) tokens.push_back(c);
    tokens.push_back((state >> 20) % 8 == 0 ? '.' : ' ');
  }
  return tokens;
}

struct Run {
  std::vector<double> losses;
  std::map<std::string, std::vector<float>> parameters;  // global values after the last step
  std::vector<size_t> peak_bytes_per_rank;
};

// Trains on `world` local ranks over `mesh_axes`; axes of size 1 need no strategy.
Run train(int world, const std::vector<MeshAxis>& mesh_axes) {
  Run run;
  run.peak_bytes_per_rank.resize(static_cast<size_t>(world));
  spawn_ranks(world, [&](RankContext& ctx) {
    DeviceMesh mesh(ctx.world, mesh_axes);
    const GPT2Config config = gpt2_preset("demo");
    GPT2 model(config, GPT2Options{.materialize = false});  // shapes only, no tensors
    const Gpt2InitValues init(config, /*seed=*/1337);

    ParallelPlan plan;  // applied pipeline -> tensor -> data, whatever the order added
    if (mesh.axis_size("pp") > 1)
      plan.add(std::make_unique<PpStrategy>(PpOptions{.schedule = ScheduleKind::one_f_one_b}),
               {"pp"});
    if (mesh.axis_size("tp") > 1)
      plan.add(std::make_unique<TpStrategy>(TpOptions{.sequence_parallel = true}), {"tp"});
    if (mesh.axis_size("dp_shard") > 1)
      plan.add(std::make_unique<FsdpStrategy>(FsdpOptions{.mode = FsdpMode::full}), {"dp_shard"});
    ParallelModel pm = plan.apply(mesh, model, &init);  // each rank fills only its pieces

    TokenBatches batches(training_tokens(), config.vocab, kBatch, kSeq, mesh.axis_size("dp"),
                         mesh.axis_rank("dp"));
    AdamW optimizer(AdamWConfig{.weight_decay = 0.1f});  // one for the run: it keeps the moments
    const LrSchedule lr{.lr = 1e-3f, .warmup_steps = 4};
    const int64_t micro_rows = batches.local_batch() / kMicroBatches;
    for (int step = 0; step < kSteps; ++step) {
      const TokenBatch batch = batches.batch(step);  // this data rank's sequences
      std::vector<MicroBatch> micro_batches(kMicroBatches);
      for (int k = 0; k < kMicroBatches; ++k) {
        micro_batches[k].tokens = batch.tokens.rows(k * micro_rows, micro_rows);
        micro_batches[k].targets = batch.targets.rows(k * micro_rows, micro_rows);
      }
      const double loss = pm.runner->run(micro_batches, double(kBatch * kSeq));

      const std::vector<OptimizerSlot> slots = pm.state->optimizer_slots();  // this rank's shards
      const double grad_norm = global_grad_norm(slots, mesh);
      clip_grads(slots, grad_norm, kClip);
      optimizer.step(slots, lr.at(step));
      pm.state->zero_grad();
      if (ctx.rank == 0) {
        std::printf("  step %d  loss %.4f  grad norm %.3f\n", step + 1, loss, grad_norm);
        run.losses.push_back(loss);
      }
    }
    run.peak_bytes_per_rank[ctx.rank] = ctx.memory.stats(DeviceKind::cpu).total.peak;
    // Rank 0 receives each global parameter in turn, every slice straight from its owner.
    gather_parameters(*pm.state, mesh, model, [&](const Parameter& p, const Tensor& value) {
      run.parameters[p.name()] = value.to_vector();
    });
  });
  return run;
}

double relative_difference(double a, double b) { return std::abs(a - b) / std::abs(b); }

}  // namespace

int main() {
  std::printf("3D: pp=2 x dp_shard=2 x tp=2 on 8 local ranks\n");
  const Run three_d = train(8, {{"pp", 2}, {"dp_shard", 2}, {"tp", 2}});
  std::printf("reference: the same on one rank\n");
  const Run single = train(1, {{"pp", 1}, {"dp_shard", 1}, {"tp", 1}});

  double worst_loss = 0.0, worst_parameter = 0.0;
  for (int s = 0; s < kSteps; ++s)
    worst_loss = std::max(worst_loss, relative_difference(three_d.losses[s], single.losses[s]));
  for (const auto& [name, expected] : single.parameters) {
    const std::vector<float>& actual = three_d.parameters.at(name);
    for (size_t i = 0; i < expected.size(); ++i)
      worst_parameter = std::max(worst_parameter, double(std::abs(actual[i] - expected[i])));
  }
  const auto peak = *std::max_element(three_d.peak_bytes_per_rank.begin(),
                                      three_d.peak_bytes_per_rank.end());
  std::printf("peak memory per rank: %.2f MiB in 3D, %.2f MiB on one rank\n", peak / 1048576.0,
              single.peak_bytes_per_rank[0] / 1048576.0);
  std::printf("largest difference from one rank: loss %.2e (relative), parameters %.2e\n",
              worst_loss, worst_parameter);
  // Float sums run in another order across ranks; anything beyond rounding is a bug.
  const bool same = worst_loss < 1e-5 && worst_parameter < 1e-5;
  std::printf("%s\n", same ? "3D matches the single-rank run" : "MISMATCH");
  return same ? 0 : 1;
}
