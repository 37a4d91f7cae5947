#include "meshtrain/plan/calibrate.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>

#include "meshtrain/core/comm/local/local_world.h"
#include "meshtrain/core/comm/local/spawn_ranks.h"
#include "meshtrain/core/error.h"
#include "meshtrain/core/ops/cpu/cpu_threads.h"
#include "meshtrain/core/ops/op_counts.h"
#include "meshtrain/core/trace/recorder.h"
#include "meshtrain/mesh/axis_names.h"
#include "meshtrain/mesh/device_mesh.h"
#include "meshtrain/models/adamw.h"
#include "meshtrain/models/gpt2_family.h"
#include "meshtrain/models/llama_family.h"
#include "meshtrain/plan/rank_replay.h"
#include "meshtrain/plan/step_time.h"
#include "meshtrain/plan/sweep.h"

namespace meshtrain {

namespace {

struct Fit {
  KernelFit fit;
  double residual = 0;  // sum of squares
};

// Each sample's error relative to its time, so that the small shapes (a rank's share of a
// layout) are fitted as closely as the large ones: an absolute fit follows the largest shape and
// turns small GEMMs' lower rate into a fixed cost per call that small calls never pay.
double weight_of(const KernelSample& s) { return 1 / std::max(s.seconds, 1e-9); }

Fit evaluate(const std::vector<KernelSample>& samples, KernelFit fit) {
  Fit out{fit, 0};
  for (const KernelSample& s : samples) {
    const double e =
        (fit.per_call * static_cast<double>(s.calls) + fit.per_unit * s.work - s.seconds) *
        weight_of(s);
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

// The shapes the kernels are measured at: both families (their ops differ), two widths each, at
// three sizes of micro-batch (4 x 128, 2 x 64 and 1 x 32 tokens), so that what grows with the
// tokens and not with the width (attention's softmax over T x T per head) is not taken for a
// call's fixed cost, and a rank's share of a batch falls among the measured sizes.
struct CalibrationShape {
  ModelSpecPtr model;
  Workload workload;
};

std::vector<CalibrationShape> calibration_shapes() {
  std::vector<CalibrationShape> shapes;
  for (const int64_t dim : {128, 384}) {
    const std::vector<ModelSpecPtr> models{gpt2_model(GPT2Config{256, 128, dim, 2, 4}),
                                           llama_model(LlamaConfig{.vocab = 256,
                                                                   .ctx = 128,
                                                                   .dim = dim,
                                                                   .ffn_dim = dim * 8 / 3,
                                                                   .layers = 2,
                                                                   .heads = 4,
                                                                   .kv_heads = 2})};
    for (const ModelSpecPtr& model : models)
      for (const Workload& workload : {Workload{.batch = 8, .seq = 128, .micro_batches = 2},
                                       Workload{.batch = 4, .seq = 64, .micro_batches = 2},
                                       Workload{.batch = 2, .seq = 32, .micro_batches = 2}})
        shapes.push_back({model, workload});
  }
  return shapes;
}

// The kinds of collective a calibration fits, as training steps issue them: FSDP's all-gathers
// and reduce-scatters, TP's and HSDP's all-reduces, and a pipeline's transfers (send, whose fit
// serves recv too: each measured as a shift around the group, a send and a receive a rank).
constexpr std::array<CommOp, 4> kMeasuredKinds = {CommOp::all_gather, CommOp::reduce_scatter,
                                                  CommOp::all_reduce, CommOp::send};

// One round's measurements of a kind of collective in groups of one size.
struct CollectiveSamples {
  std::vector<KernelSample> calls;   // a size each: the calls a rank makes, work = bytes sent
  std::vector<double> call_latency;  // seconds, a latency loop each
};

// The fastest of the samples of each size (the rounds' best of five, the best of them all).
std::vector<KernelSample> fastest_of_each_size(const std::vector<KernelSample>& samples) {
  std::map<double, KernelSample> fastest;
  for (const KernelSample& s : samples) {
    const auto [it, added] = fastest.emplace(s.work, s);
    if (!added && s.seconds < it->second.seconds) it->second = s;
  }
  std::vector<KernelSample> out;
  for (const auto& [work, sample] : fastest) out.push_back(sample);
  return out;
}

// A burst of compute standing for a step's kernels between two of its collectives (about 200 us
// here: 100,000 dependent multiply-adds). The empty asm keeps the compiler from moving the work
// across the clock's reads or the waits around it.
float compute_burst(float x) {
  for (int i = 0; i < 100000; ++i) x = x * 0.999999f + 1e-6f;
  asm volatile("" : "+x"(x));
  return x;
}

// The buffers of a call of `kind` moving `floats` elements in all over a group of `size` (a
// rank's part of a gather or scatter is floats / size): `in` what it reads, `out` what it writes
// (an all-reduce's one buffer).
struct CallBuffers {
  Tensor in, out;
};
CallBuffers call_buffers(CommOp kind, int64_t floats, int64_t size) {
  const int64_t chunk = floats / size;
  switch (kind) {
    case CommOp::all_gather:
      return {Tensor::zeros({chunk}), Tensor::zeros({chunk * size})};
    case CommOp::reduce_scatter:
      return {Tensor::zeros({chunk * size}), Tensor::zeros({chunk})};
    case CommOp::all_reduce:
      return {Tensor(), Tensor::zeros({floats})};
    case CommOp::send:
      return {Tensor::zeros({floats}), Tensor::zeros({floats})};
    default:
      MT_ASSERT(false, "the calibration measures no ", comm_op_name(kind));
  }
  return {};
}

// One call of `kind` over `group`, waited for; the calls it made (a shift around the group is a
// send and a receive).
int call_once(Communicator& group, CommOp kind, const CallBuffers& b) {
  switch (kind) {
    case CommOp::all_gather:
      group.all_gather_into(b.out, b.in)->wait();
      return 1;
    case CommOp::reduce_scatter:
      group.reduce_scatter_into(b.out, b.in, ReduceOp::sum)->wait();
      return 1;
    case CommOp::all_reduce:
      group.all_reduce(b.out, ReduceOp::sum)->wait();
      return 1;
    case CommOp::send: {
      const int rank = group.rank(), size = group.size();
      const WorkPtr sent = group.send(b.in, (rank + 1) % size);
      group.recv(b.out, (rank + size - 1) % size)->wait();
      sent->wait();
      return 2;
    }
    default:
      MT_ASSERT(false, "the calibration measures no ", comm_op_name(kind));
  }
  return 0;
}

// The collectives of `kind` in groups of `group_size` of `ranks` local ranks, every group at once
// (as a mesh axis's groups run), rank 0's view, in one round of the calibration.
//
// Bandwidth: calls of a range of sizes, each timed from a barrier to its completion, the best of
// five (its buffers made before the clock starts).
//
// Latency, as a training step's calls meet it: each rank arrives from a burst of compute and
// sleeps in its wait until the group's last rank has arrived and moved the data, so a call costs
// the ranks' wake-ups and switches (on a VM, the interrupts that wake an idle core), which the best
// case after a barrier does not show. Measured as the time a loop of bursts takes with a small
// call after each, less the same loop without them, per call; the two loops taken in turn, a few
// times.
CollectiveSamples measure_collectives(int ranks, int group_size, CommOp kind) {
  constexpr int kLatencyLoops = 3;
  constexpr int kLatencyCalls = 400;
  CollectiveSamples out;
  spawn_ranks(ranks, [&](RankContext& ctx) {
    const DeviceMesh mesh(ctx.world,
                          parse_mesh_spec(detail::concat("dp_replicate=", ranks / group_size,
                                                         ",dp_shard=", group_size)));
    Communicator& group = mesh.comm(mesh_axis::dp_shard);
    for (int64_t floats = 16 << 10; floats <= (4 << 20); floats *= 4) {
      const CallBuffers buffers = call_buffers(kind, floats, group_size);
      double best = 1e30;
      uint64_t sent = 0;
      int calls = 0;
      for (int repeat = 0; repeat < 5; ++repeat) {
        ctx.world.barrier()->wait();
        const uint64_t before = group.counters().total_sent();
        const auto start = std::chrono::steady_clock::now();
        calls = call_once(group, kind, buffers);
        best = std::min(
            best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
        sent = group.counters().total_sent() - before;
      }
      if (ctx.rank == 0) out.calls.push_back({calls, static_cast<double>(sent), best});
    }

    const CallBuffers small = call_buffers(kind, 256 * group_size, group_size);
    float carried = 1;
    int calls = 0;
    const auto loop_seconds = [&](bool with_calls) {
      ctx.world.barrier()->wait();
      const auto start = std::chrono::steady_clock::now();
      for (int call = 0; call < kLatencyCalls; ++call) {
        carried = compute_burst(carried);
        if (with_calls) calls = call_once(group, kind, small);
      }
      ctx.world.barrier()->wait();
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    for (int loop = 0; loop < kLatencyLoops; ++loop) {
      const double bursts = loop_seconds(false);
      const double with_calls = loop_seconds(true);
      if (ctx.rank == 0)
        out.call_latency.push_back((with_calls - bursts) / (kLatencyCalls * calls));
    }
  });
  return out;
}

// One rank's training steps of a model shape on a layout, as a run takes them (forward and
// backward, AdamW, gradients zeroed), over `batches` batches of a fixed token stream.
class TrainingSteps {
 public:
  TrainingSteps(Communicator& world, const ModelSpec& spec, const PlanLayout& layout,
                const Workload& workload, int64_t batches)
      : workload_(workload),
        mesh_(world, layout.mesh),
        model_(spec.build(Device::cpu())),
        values_(spec.init_values(/*seed=*/0)),
        plan_(strategies_of(layout)),
        parallel_(plan_.apply(mesh_, *model_, values_.get())),
        batches_(calibration_tokens(workload.batch * workload.seq * batches + 1, spec.vocab()),
                 spec.vocab(), workload.batch, workload.seq, mesh_.axis_size(mesh_axis::dp),
                 mesh_.axis_rank(mesh_axis::dp)) {}

  void step(int64_t s) {
    std::vector<MicroBatch> mbs = workload_.micro_batches_of(batches_.batch(s));
    parallel_.runner->forward_backward(mbs,
                                       static_cast<double>(workload_.batch * workload_.seq));
    optimizer_.step(parallel_.state->optimizer_slots(), /*lr=*/1e-4f);
    parallel_.state->zero_grad();
  }

 private:
  Workload workload_;
  DeviceMesh mesh_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<ParameterSource> values_;
  ParallelPlan plan_;
  ParallelModel parallel_;
  AdamW optimizer_;
  TokenBatches batches_;
};

// The step the share of a node's cores is measured on (shared_core_efficiency): FSDP over every
// local rank, one row of 64 tokens a rank and micro-batch of a calibration shape.
struct SharedCoresStep {
  explicit SharedCoresStep(int ranks)
      : model(gpt2_model(GPT2Config{256, 128, 128, 2, 4})),
        layout{.mesh = parse_mesh_spec(detail::concat("dp_shard=", ranks))},
        workload{.batch = 2 * ranks, .seq = 64, .micro_batches = 2} {}
  ModelSpecPtr model;
  PlanLayout layout;
  Workload workload;
};

// `rounds` short rounds of the shared-cores step, the seconds of a step in each. A round is short
// and the rounds many: such a step's time varies by a third from one round to the next as the
// scheduler places the ranks, and the calibration spreads its rounds among the kernels' so that
// they see the machine's pace over the same minute.
std::vector<double> time_shared_cores_step(const CalibrationOptions& options, int rounds) {
  const SharedCoresStep shape(options.ranks);
  constexpr int kSteps = 4;
  std::vector<double> out;
  spawn_ranks(options.ranks, [&](RankContext& ctx) {
    ops::cpu::set_cpu_threads(options.threads_per_rank);
    TrainingSteps training(ctx.world, *shape.model, shape.layout, shape.workload,
                           kSteps * rounds + 1);
    training.step(0);  // untimed: first-touch allocations, the optimizer's moments
    for (int round = 0; round < rounds; ++round) {
      ctx.world.barrier()->wait();
      const auto start = std::chrono::steady_clock::now();
      for (int s = 1; s <= kSteps; ++s) training.step(round * kSteps + s);
      ctx.world.barrier()->wait();
      if (ctx.rank == 0)
        out.push_back(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
            kSteps);
    }
  });
  return out;
}

// The shared-cores step's share of the cores (cores_share_of_step), from its median time over its
// rounds.
double shared_core_efficiency(const CalibrationOptions& options, const MachineProfile& profile,
                              std::vector<double> step_seconds) {
  const SharedCoresStep shape(options.ranks);
  const StepTimePrediction predicted =
      predict_step_time(shape.layout, shape.workload,
                        replay_ranks(*shape.model, shape.layout, shape.workload), profile);
  return cores_share_of_step(predicted, profile, median(std::move(step_seconds)));
}

// The sample of the median time among one shape's rounds (of an even count, the slower middle).
template <typename Pick>
KernelSample median_sample(const std::vector<MeasuredSteps>& rounds, Pick pick) {
  std::vector<KernelSample> of_rounds;
  for (const MeasuredSteps& round : rounds) of_rounds.push_back(pick(round));
  const auto middle = of_rounds.begin() + static_cast<std::ptrdiff_t>(of_rounds.size() / 2);
  std::nth_element(
      of_rounds.begin(), middle, of_rounds.end(),
      [](const KernelSample& a, const KernelSample& b) { return a.seconds < b.seconds; });
  return *middle;
}

}  // namespace

KernelFit fit_kernel(const std::vector<KernelSample>& samples) {
  MT_CHECK(!samples.empty(), "fit_kernel: no samples");
  // Normal equations of the two-parameter least squares, each sample weighted (weight_of).
  double cc = 0, cw = 0, ww = 0, ct = 0, wt = 0;
  for (const KernelSample& s : samples) {
    const double k = weight_of(s);
    const double c = static_cast<double>(s.calls) * k, w = s.work * k, t = s.seconds * k;
    cc += c * c;
    cw += c * w;
    ww += w * w;
    ct += c * t;
    wt += w * t;
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

MeasuredSteps measure_kernels(const ModelSpec& spec, const Workload& workload, int steps) {
  MT_CHECK(steps >= 1, "measure_kernels: at least one timed step, got ", steps);
  const PlanLayout layout{.mesh = parse_mesh_spec("dp_shard=1")};
  workload.check(layout);
  MemoryTracker memory;
  const MemoryScope counted(&memory);
  LocalWorld world(1);
  const std::unique_ptr<Communicator> comm = world.communicator(0);
  TrainingSteps training(*comm, spec, layout, workload, 2 * steps + 1);
  training.step(0);  // untimed: first-touch allocations, the optimizer's moments

  // The steps' wall time untraced, as a run takes them (tracing adds its own time to every call),
  // then the same steps again with each kernel traced and counted.
  const auto start = std::chrono::steady_clock::now();
  for (int s = 1; s <= steps; ++s) training.step(s);
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  trace::Recorder recorder(0, {.keep_spans = false});
  ops::OpCounts counts;
  {
    const trace::Bind traced(&recorder);
    const ops::OpCountScope counting(&counts);
    for (int s = steps + 1; s <= 2 * steps; ++s) training.step(s);
  }
  const std::map<std::pair<trace::Kind, std::string>, trace::Totals> timed = recorder.totals();
  MeasuredSteps out;
  double kernel_seconds = 0;
  for (const auto& [op, work] : counts.by_op()) {
    const auto t = timed.find({trace::Kind::kernel, op});
    MT_CHECK(t != timed.end(), "measure_kernels: kernel '", op, "' counted but not timed");
    const KernelSample sample{work.calls, kernel_work(work),
                              static_cast<double>(t->second.ns) * 1e-9};
    out.kernels[op] = sample;
    out.host.calls += sample.calls;
    kernel_seconds += sample.seconds;
  }
  out.host.seconds = std::max(0.0, wall - kernel_seconds);
  return out;
}

double cores_share_of_step(const StepTimePrediction& predicted, const MachineProfile& machine,
                           double measured_seconds) {
  MT_CHECK(machine.cores > 0, "cores_share_of_step: a profile of shared CPU cores, got ",
           machine.cores, " cores");
  double thread_seconds = 0;
  for (const RankStepTime& rank : predicted.ranks)
    thread_seconds += rank.compute * machine.threads_per_rank;
  const double busy = measured_seconds - predicted.ranks[predicted.slowest].total_exposed_comm();
  return busy > 0 ? std::clamp(thread_seconds / (machine.cores * busy), 0.05, 1.0) : 1.0;
}

Calibration::Calibration(const CalibrationOptions& options) : options_(options) {
  MT_CHECK(options.ranks >= 2 && options.threads_per_rank >= 1 && options.steps >= 1 &&
               options.rounds >= 1,
           "calibration: at least 2 ranks, 1 thread per rank, 1 step and 1 round, got ",
           options.ranks, " ranks, ", options.threads_per_rank, " threads, ", options.steps,
           " steps, ", options.rounds, " rounds");
}

// The shapes taken in turn within the round so that a slow spell of the machine does not skew one
// shape, the collectives and the shared-cores step's rounds after them, for the same reason.
void Calibration::measure_round() {
  const std::vector<CalibrationShape> shapes = calibration_shapes();
  kernel_rounds_.resize(shapes.size());
  {
    const CpuThreads threads(options_.threads_per_rank);
    for (size_t m = 0; m < shapes.size(); ++m)
      kernel_rounds_[m].push_back(
          measure_kernels(*shapes[m].model, shapes[m].workload, options_.steps));
  }
  // Every kind, in groups of every size that divides the ranks.
  for (const CommOp kind : kMeasuredKinds)
    for (int group_size = 2; group_size <= options_.ranks; ++group_size) {
      if (options_.ranks % group_size != 0) continue;
      const CollectiveSamples measured = measure_collectives(options_.ranks, group_size, kind);
      std::vector<KernelSample>& calls = collective_calls_[{kind, group_size}];
      calls.insert(calls.end(), measured.calls.begin(), measured.calls.end());
      std::vector<double>& latency = call_latency_[{kind, group_size}];
      latency.insert(latency.end(), measured.call_latency.begin(), measured.call_latency.end());
    }
  for (const double seconds : time_shared_cores_step(options_, /*rounds=*/5))
    shared_cores_steps_.push_back(seconds);
}

MachineProfile Calibration::finish() const {
  MT_CHECK(!kernel_rounds_.empty(), "calibration: finish() before any round was measured");
  MachineProfile profile = machine_preset("cpu");
  // The preset's one-core peaks, for MFU and the ops no shape measured, on the rank's threads.
  profile.dense_peak_flops_f32 *= options_.threads_per_rank;
  profile.dense_peak_flops_bf16 *= options_.threads_per_rank;
  profile.name = detail::concat("calibrated (", options_.threads_per_rank, " thread",
                                options_.threads_per_rank > 1 ? "s" : "", " per rank)");
  // Per shape and op, the median of the rounds, as the sweep measures a run.
  std::map<std::string, std::vector<KernelSample>> samples;
  std::vector<KernelSample> host;
  for (const std::vector<MeasuredSteps>& of_shape : kernel_rounds_) {
    for (const auto& [op, first] : of_shape.front().kernels)
      samples[op].push_back(
          median_sample(of_shape, [&](const MeasuredSteps& m) { return m.kernels.at(op); }));
    host.push_back(median_sample(of_shape, [](const MeasuredSteps& m) { return m.host; }));
  }
  for (const auto& [op, of_op] : samples) profile.kernels[op] = fit_kernel(of_op);
  profile.host_per_call = fit_kernel(host).per_call;
  // Each kind and group size: the bandwidth from its fastest calls of each size, the latency the
  // median of its loops; a receive as a send; the whole world's all-gathers as the link's
  // figures. A fit of free bytes (the sizes too noisy to show their cost) keeps the preset's
  // bandwidth.
  for (const auto& [kind_and_size, calls] : collective_calls_) {
    const auto& [kind, group_size] = kind_and_size;
    KernelFit fit = fit_kernel(fastest_of_each_size(calls));
    if (fit.per_unit <= 0) fit.per_unit = 1 / profile.intra_node_bandwidth;
    fit.per_call = std::max(0.0, median(call_latency_.at(kind_and_size)));
    profile.collectives[kind][group_size] = fit;
    if (kind == CommOp::send) profile.collectives[CommOp::recv][group_size] = fit;
  }
  const KernelFit& world = profile.collectives.at(CommOp::all_gather).at(options_.ranks);
  profile.intra_node_latency = profile.inter_node_latency = world.per_call;
  profile.intra_node_bandwidth = profile.inter_node_bandwidth = 1 / world.per_unit;
  profile.cores = ops::cpu::available_cpus();
  profile.threads_per_rank = options_.threads_per_rank;
  profile.shared_core_efficiency = shared_core_efficiency(options_, profile, shared_cores_steps_);
  profile.check();
  return profile;
}

MachineProfile calibrate_this_machine(const CalibrationOptions& options) {
  Calibration calibration(options);
  for (int round = 0; round < options.rounds; ++round) calibration.measure_round();
  return calibration.finish();
}

}  // namespace meshtrain
