#include "meshtrain/plan/calibrate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>

#include "meshtrain/core/comm/local/local_world.h"
#include "meshtrain/core/comm/local/spawn_ranks.h"
#include "meshtrain/core/error.h"
#include "meshtrain/core/ops/cpu/cpu_threads.h"
#include "meshtrain/core/ops/op_counts.h"
#include "meshtrain/core/ops/ops.h"
#include "meshtrain/core/trace/recorder.h"
#include "meshtrain/mesh/device_mesh.h"
#include "meshtrain/models/adamw.h"
#include "meshtrain/models/gpt2_family.h"
#include "meshtrain/models/llama_family.h"
#include "meshtrain/plan/step_time.h"

namespace meshtrain {

namespace {

struct Fit {
  KernelFit fit;
  double residual = 0;  // sum of squares
};

Fit evaluate(const std::vector<KernelSample>& samples, KernelFit fit) {
  Fit out{fit, 0};
  for (const KernelSample& s : samples) {
    const double e =
        fit.per_call * static_cast<double>(s.calls) + fit.per_unit * s.work - s.seconds;
    out.residual += e * e;
  }
  return out;
}

// The calls' token stream: a fixed pseudo-random sequence over the vocabulary.
std::vector<Token> calibration_tokens(int64_t count, int64_t vocab) {
  std::vector<Token> tokens(static_cast<size_t>(count));
  uint64_t state = 0x9e3779b97f4a7c15ull;
  for (Token& t : tokens) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    t = static_cast<Token>((state >> 33) % static_cast<uint64_t>(vocab));
  }
  return tokens;
}

// Sets this thread's CPU kernel threads for the scope's lifetime.
class CpuThreads {
 public:
  explicit CpuThreads(int threads) : previous_(ops::cpu::cpu_threads()) {
    ops::cpu::set_cpu_threads(threads);
  }
  ~CpuThreads() { ops::cpu::set_cpu_threads(previous_); }
  CpuThreads(const CpuThreads&) = delete;
  CpuThreads& operator=(const CpuThreads&) = delete;

 private:
  int previous_;
};

// The shapes the kernels are measured at: both families (their ops differ), two widths each.
std::vector<ModelSpecPtr> calibration_models() {
  std::vector<ModelSpecPtr> models;
  for (const int64_t dim : {128, 384}) {
    models.push_back(gpt2_model(GPT2Config{256, 128, dim, 2, 4}));
    models.push_back(llama_model(LlamaConfig{.vocab = 256,
                                             .ctx = 128,
                                             .dim = dim,
                                             .ffn_dim = dim * 8 / 3,
                                             .layers = 2,
                                             .heads = 4,
                                             .kv_heads = 2}));
  }
  return models;
}

// Latency + bytes sent / bandwidth of the all-gathers of a range of sizes over `ranks` local
// ranks, rank 0's view: each timed from a barrier to its completion, the best of several.
KernelFit measure_all_gathers(int ranks) {
  std::vector<KernelSample> samples;  // calls 1, work = bytes sent
  spawn_ranks(ranks, [&](RankContext& ctx) {
    for (int64_t floats = 16 << 10; floats <= (4 << 20); floats *= 4) {
      const int64_t chunk = floats / ranks;  // each rank's part
      const Tensor in = Tensor::zeros({chunk});
      const Tensor out = Tensor::zeros({chunk * ranks});
      double best = 1e30;
      uint64_t sent = 0;
      for (int repeat = 0; repeat < 5; ++repeat) {
        ctx.world.barrier()->wait();
        const uint64_t before = ctx.world.counters().total_sent();
        const auto start = std::chrono::steady_clock::now();
        ctx.world.all_gather_into(out, in)->wait();
        best = std::min(
            best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
        sent = ctx.world.counters().total_sent() - before;
      }
      if (ctx.rank == 0) samples.push_back({1, static_cast<double>(sent), best});
    }
  });
  return fit_kernel(samples);
}

// Seconds a small blocking collective adds between bursts of compute on `ranks` local ranks with
// `threads` threads each: what a training step's collectives cost once the ranks arrive apart
// and share the cores, beyond the compute itself (which the same loop without the collective
// times, on every rank at once). Rank 0's view, the better of two tries.
double measure_collective_under_load(int ranks, int threads) {
  constexpr int kIterations = 20;
  double added = 1e30;
  spawn_ranks(ranks, [&](RankContext& ctx) {
    ops::cpu::set_cpu_threads(threads);
    const Tensor a = Tensor::zeros({192, 192}), out = Tensor::zeros({192, 192});
    const Tensor in = Tensor::zeros({1024}), gathered = Tensor::zeros({1024 * ranks});
    const auto loop = [&](bool collective) {
      ctx.world.barrier()->wait();
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < kIterations; ++i) {
        // Uneven bursts, so that the ranks arrive apart: rank r computes r % 3 + 1 products.
        for (int k = 0; k <= ctx.rank % 3; ++k) ops::matmul(out, a, a, false, false, 1.0f, 0.0f);
        if (collective) ctx.world.all_gather_into(gathered, in)->wait();
      }
      ctx.world.barrier()->wait();
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    for (int attempt = 0; attempt < 2; ++attempt) {
      const double alone = loop(false), together = loop(true);
      if (ctx.rank == 0) added = std::min(added, std::max(0.0, (together - alone) / kIterations));
    }
  });
  return added;
}

}  // namespace

KernelFit fit_kernel(const std::vector<KernelSample>& samples) {
  MT_CHECK(!samples.empty(), "fit_kernel: no samples");
  // Normal equations of the two-parameter least squares.
  double cc = 0, cw = 0, ww = 0, ct = 0, wt = 0;
  for (const KernelSample& s : samples) {
    const double c = static_cast<double>(s.calls);
    cc += c * c;
    cw += c * s.work;
    ww += s.work * s.work;
    ct += c * s.seconds;
    wt += s.work * s.seconds;
  }
  std::vector<Fit> candidates;
  const double det = cc * ww - cw * cw;
  if (det > 1e-12 * cc * ww) {
    const KernelFit both{(ct * ww - cw * wt) / det, (cc * wt - cw * ct) / det};
    if (both.per_call >= 0 && both.per_unit >= 0) candidates.push_back(evaluate(samples, both));
  }
  // On the boundary: one parameter alone (non-negative least squares).
  if (cc > 0) candidates.push_back(evaluate(samples, {std::max(0.0, ct / cc), 0}));
  if (ww > 0) candidates.push_back(evaluate(samples, {0, std::max(0.0, wt / ww)}));
  if (candidates.empty()) return {};
  return std::min_element(candidates.begin(), candidates.end(),
                          [](const Fit& a, const Fit& b) { return a.residual < b.residual; })
      ->fit;
}

std::map<std::string, KernelSample> measure_kernels(const ModelSpec& spec, const Workload& workload,
                                                    int steps) {
  MT_CHECK(steps >= 1, "measure_kernels: at least one timed step, got ", steps);
  const PlanLayout layout{.mesh = parse_mesh_spec("dp_shard=1")};
  workload.check(layout);
  MemoryTracker memory;
  const MemoryScope counted(&memory);
  LocalWorld world(1);
  const std::unique_ptr<Communicator> comm = world.communicator(0);
  DeviceMesh mesh(*comm, layout.mesh);
  const std::unique_ptr<Model> model = spec.build(Device::cpu());
  const std::unique_ptr<ParameterSource> values = spec.init_values(/*seed=*/0);
  ParallelPlan plan = strategies_of(layout);
  ParallelModel parallel = plan.apply(mesh, *model, values.get());
  AdamW optimizer;
  const TokenBatches batches(
      calibration_tokens(workload.batch * workload.seq * (steps + 1) + 1, spec.vocab()),
      spec.vocab(), workload.batch, workload.seq);
  const auto step = [&](int64_t s) {
    std::vector<MicroBatch> mbs = workload.micro_batches_of(batches.batch(s));
    parallel.runner->forward_backward(mbs, static_cast<double>(workload.batch * workload.seq));
    optimizer.step(parallel.state->optimizer_slots(), /*lr=*/1e-4f);
    parallel.state->zero_grad();
  };
  step(0);  // untimed: first-touch allocations, the optimizer's moments

  trace::Recorder recorder(0, {.keep_spans = false});
  ops::OpCounts counts;
  {
    const trace::Bind traced(&recorder);
    const ops::OpCountScope counting(&counts);
    for (int s = 1; s <= steps; ++s) step(s);
  }
  const std::map<std::pair<trace::Kind, std::string>, trace::Totals> timed = recorder.totals();
  std::map<std::string, KernelSample> out;
  for (const auto& [op, work] : counts.by_op()) {
    const auto t = timed.find({trace::Kind::kernel, op});
    MT_CHECK(t != timed.end(), "measure_kernels: kernel '", op, "' counted but not timed");
    out[op] = {work.calls, kernel_work(work), static_cast<double>(t->second.ns) * 1e-9};
  }
  return out;
}

MachineProfile calibrate_this_machine(const CalibrationOptions& options) {
  MT_CHECK(options.ranks >= 2 && options.threads_per_rank >= 1 && options.steps >= 1 &&
               options.rounds >= 1,
           "calibration: at least 2 ranks, 1 thread per rank, 1 step and 1 round, got ",
           options.ranks, " ranks, ", options.threads_per_rank, " threads, ", options.steps,
           " steps, ", options.rounds, " rounds");
  MachineProfile profile = machine_preset("cpu");
  // The preset's one-core peaks, for MFU and the ops no shape measured, on the rank's threads.
  profile.dense_peak_flops_f32 *= options.threads_per_rank;
  profile.dense_peak_flops_bf16 *= options.threads_per_rank;
  profile.name = detail::concat("calibrated (", options.threads_per_rank, " thread",
                                options.threads_per_rank > 1 ? "s" : "", " per rank)");
  // Per shape and op, the fastest of the rounds (noise only ever adds time), the shapes taken in
  // turn within each round so that a slow spell of the machine does not skew one shape.
  const std::vector<ModelSpecPtr> models = calibration_models();
  std::vector<std::map<std::string, KernelSample>> fastest(models.size());
  {
    const CpuThreads threads(options.threads_per_rank);
    const Workload workload{.batch = 8, .seq = 128, .micro_batches = 2};
    for (int round = 0; round < options.rounds; ++round)
      for (size_t m = 0; m < models.size(); ++m)
        for (const auto& [op, sample] : measure_kernels(*models[m], workload, options.steps)) {
          const auto [it, first] = fastest[m].emplace(op, sample);
          if (!first && sample.seconds < it->second.seconds) it->second = sample;
        }
  }
  std::map<std::string, std::vector<KernelSample>> samples;
  for (const auto& of_model : fastest)
    for (const auto& [op, sample] : of_model) samples[op].push_back(sample);
  for (const auto& [op, of_op] : samples) profile.kernels[op] = fit_kernel(of_op);
  const KernelFit collectives = measure_all_gathers(options.ranks);
  // A call's latency as a step meets it: ranks arriving apart on shared cores, when that costs
  // more than the idle fit's.
  profile.intra_node_latency = profile.inter_node_latency = std::max(
      collectives.per_call, measure_collective_under_load(options.ranks, options.threads_per_rank));
  profile.cores = ops::cpu::available_cpus();
  profile.threads_per_rank = options.threads_per_rank;
  if (collectives.per_unit > 0)
    profile.intra_node_bandwidth = profile.inter_node_bandwidth = 1 / collectives.per_unit;
  profile.check();
  return profile;
}

}  // namespace meshtrain
