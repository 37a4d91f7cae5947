// End-to-end pipeline-parallel training benchmark: GPT-2 (byte-level vocab) trained at pp=W on
// the local backend once per schedule — GPipe (the ratio base), 1F1B, interleaved 1F1B with v=2
// and ZB-H1 — in one run. Every schedule does the same arithmetic on the same data, so what
// differs is how long ranks wait. Per schedule it reports the median step time, each rank's
// measured bubble (PipelineTiming: time not spent in F/B/W actions over the runner's step time),
// the simulator's bubble for the same schedule with the measured per-action costs, and memory per
// rank (total peak, and the activation peak that the schedule's in-flight micro-batches set).
//
//   pp_train_bench [--world=4] [--microbatches=8] [--dim=256] [--layers=8] [--heads=8] [--seq=64]
//                  [--batch=16] [--warmup=2] [--steps=10] [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "meshtrain/train/trainer.h"
#include "bench/train/mode_run.h"
#include "bench/train/token_corpus.h"
#include "meshtrain/core/comm/local/spawn_ranks.h"
#include "meshtrain/core/error.h"
#include "meshtrain/mesh/axis_names.h"
#include "meshtrain/plugins/pp/pipeline_runner.h"
#include "meshtrain/plugins/pp/schedule_sim.h"

namespace meshtrain::bench {
namespace {

// 8 blocks so that pp=4 x v=2 stages get one block each; batch 16 = 8 micro-batches of 2.
BenchSettings g_settings{.world = 4, .dim = 256, .layers = 8, .heads = 8, .steps = 10};
int g_micro_batches = 8;
std::string g_data_path;

struct ScheduleSpec {
  std::string name;  // the pp plugin's schedule option
  int virtual_stages = 1;
};

struct ScheduleResult {
  double step_s = 0, tokens_per_s = 0, cpu_s = 0, loss = 0;
  Costs costs;                 // measured mean seconds per action, pooled over ranks
  std::vector<double> bubble;  // per pp rank, over all measured steps
  double bubble_mean = 0;
  Simulation sim;                  // the schedule replayed with `costs`
  std::vector<uint64_t> peak_mem;  // per rank, largest over measured steps
  std::vector<uint64_t> act_peak;  // per pp rank: activation category, largest over steps
};

std::vector<std::string> g_order;
std::map<std::string, ScheduleResult> g_results;

// Blocks spread evenly over the stages, the embedding added to the first and the head to the
// last ("3,2,2,3" for 8 blocks on 4 stages). The default split counts the embedding and head as
// whole layers (10 layers on 4 stages: 3,3,2,2), which would give one rank an extra block; the
// simulator assumes equal stages, so the comparison needs balanced ones.
std::string balanced_layers(int64_t blocks, int stages) {
  MT_CHECK(blocks >= stages, "--layers (transformer blocks) must be at least pp x virtual stages (",
           stages, "), got ", blocks);
  std::string out;
  for (int s = 0; s < stages; ++s) {
    const int64_t n =
        (s + 1) * blocks / stages - s * blocks / stages + (s == 0) + (s == stages - 1);
    if (s) out += ',';
    out += std::to_string(n);
  }
  return out;
}

TrainConfig schedule_config(const BenchSettings& s, const ScheduleSpec& spec) {
  ModeSpec mode{spec.name, MeshLayout({{std::string(mesh_axis::pp), s.world}}), {}};
  mode.strategies["pp"] = {{"schedule", spec.name},
                           {"virtual", std::to_string(spec.virtual_stages)},
                           {"layers", balanced_layers(s.layers, s.world * spec.virtual_stages)}};
  TrainConfig config = make_train_config(s, mode, g_data_path);
  config.grad_accum = g_micro_batches;
  config.validate();
  return config;
}

ScheduleResult run_schedule(const BenchSettings& s, const ScheduleSpec& spec) {
  const TrainConfig config = schedule_config(s, spec);
  const int ranks = s.world;
  // Each rank thread writes only its own slot; rank 0 also keeps the (already rank-reduced)
  // step metrics and the schedule it ran.
  std::vector<PipelineTiming> totals(ranks);  // summed over measured steps
  std::vector<uint64_t> act_peak(ranks, 0);
  std::vector<StepMetrics> measured;
  Schedule schedule;
  double cpu_start = 0, cpu_end = 0;
  spawn_ranks(ranks, [&](RankContext& ctx) {
    Trainer trainer(config, ctx.world, ctx.memory);
    auto& runner = dynamic_cast<PipelineRunner&>(trainer.runner());
    const int r = runner.placement().rank;
    for (int i = 0; i < s.warmup; ++i) trainer.step();
    // Each step ends in a collective, so rank 0's clock brackets every rank's measured steps.
    if (ctx.rank == 0) cpu_start = process_cpu_seconds();
    for (int i = 0; i < s.steps; ++i) {
      StepMetrics m = trainer.step();
      totals[r] += runner.last_timing();
      // Trainer::step resets the peaks when it starts, so this is the step's own peak.
      act_peak[r] = std::max<uint64_t>(
          act_peak[r], ctx.memory.stats(DeviceKind::cpu)[MemoryCategory::activation].peak);
      if (ctx.rank == 0) measured.push_back(std::move(m));
    }
    if (ctx.rank == 0) {
      cpu_end = process_cpu_seconds();
      schedule = runner.schedule(g_micro_batches);
    }
  });

  ScheduleResult res;
  std::vector<double> step_s;
  res.peak_mem.assign(ranks, 0);
  for (const StepMetrics& m : measured) {
    step_s.push_back(m.step_time_s);
    for (int r = 0; r < ranks; ++r)
      res.peak_mem[r] = std::max(res.peak_mem[r], m.peak_mem_per_rank.at(r));
  }
  res.step_s = median(step_s);
  res.tokens_per_s = static_cast<double>(s.batch * s.seq) / res.step_s;
  res.cpu_s = (cpu_end - cpu_start) / s.steps;
  res.loss = measured.back().loss;
  res.act_peak = act_peak;

  // Ratios of sums over the measured steps: a per-step median of a fraction would mix steps.
  PipelineTiming all;
  for (const PipelineTiming& t : totals) {
    res.bubble.push_back(t.idle_fraction());
    res.bubble_mean += t.idle_fraction() / ranks;
    all += t;
  }
  // A schedule with no W actions runs full backwards, which the simulator costs as I + W: W = 0
  // keeps that equal to the measured full backward.
  const auto per = [](double seconds, int count) { return count ? seconds / count : 0.0; };
  res.costs = {per(all.forward_s, all.forwards), per(all.backward_input_s, all.backwards),
               per(all.backward_weight_s, all.weights)};
  res.sim = simulate(schedule, res.costs);
  return res;
}

void bench_schedule(benchmark::State& state, const ScheduleSpec& spec) {
  ScheduleResult r;
  for (auto _ : state) {
    r = run_schedule(g_settings, spec);
    state.SetIterationTime(r.step_s);
  }
  if (!g_results.count(spec.name)) g_order.push_back(spec.name);
  g_results[spec.name] = r;
  state.counters["tok_per_s"] = r.tokens_per_s;
  state.counters["bubble_meas"] = r.bubble_mean;
  state.counters["bubble_sim"] = r.sim.bubble_fraction;
  state.counters["tF_ms"] = r.costs.forward * 1e3;
  state.counters["tB_ms"] = r.costs.backward_input * 1e3;
  state.counters["tW_ms"] = r.costs.backward_weight * 1e3;
  state.counters["peak_MiB_max"] = *std::max_element(r.peak_mem.begin(), r.peak_mem.end()) / kMiB;
  state.counters["act_MiB_stage0"] = r.act_peak.front() / kMiB;
  state.counters["loss"] = r.loss;
  if (const auto base = g_results.find("gpipe"); base != g_results.end())
    state.counters["ratio_vs_gpipe"] = r.step_s / base->second.step_s;
}

// "a/b/c/d": one value per rank, so that the table keeps its shape at any --world.
template <typename T, typename F>
std::string per_rank(const std::vector<T>& values, const char* format, F scale) {
  std::string out;
  char cell[32];
  for (size_t i = 0; i < values.size(); ++i) {
    std::snprintf(cell, sizeof cell, format, scale(values[i]));
    if (i) out += '/';
    out += cell;
  }
  return out;
}

void print_summary() {
  const auto base = g_results.find("gpipe");
  const auto same = [](double x) { return x; };
  const auto mib = [](uint64_t x) { return x / kMiB; };
  std::printf("\n%-12s %8s %8s %7s %10s %7s %7s %7s %-23s %9s %9s %7s\n", "schedule", "step ms",
              "vs gpipe", "tok/s", "cpu s/step", "t_F ms", "t_B ms", "t_W ms", "bubble per rank",
              "bub mean", "bub sim", "loss");
  for (const std::string& name : g_order) {
    const ScheduleResult& r = g_results.at(name);
    char ratio[16] = "-";
    if (base != g_results.end())
      std::snprintf(ratio, sizeof ratio, "%.3f", r.step_s / base->second.step_s);
    std::printf("%-12s %8.1f %8s %7.0f %10.3f %7.2f %7.2f %7.2f %-23s %9.3f %9.3f %7.4f\n",
                name.c_str(), r.step_s * 1e3, ratio, r.tokens_per_s, r.cpu_s, r.costs.forward * 1e3,
                r.costs.backward_input * 1e3, r.costs.backward_weight * 1e3,
                per_rank(r.bubble, "%.3f", same).c_str(), r.bubble_mean, r.sim.bubble_fraction,
                r.loss);
  }
  std::printf("\n%-12s %-27s %-27s %-18s %-18s\n", "schedule", "peak MiB per rank",
              "activation MiB per rank", "sim bubble/rank", "sim in-flight/rank");
  for (const std::string& name : g_order) {
    const ScheduleResult& r = g_results.at(name);
    std::vector<double> sim_bubble;
    for (double idle : r.sim.idle) sim_bubble.push_back(idle / r.sim.makespan);
    std::printf(
        "%-12s %-27s %-27s %-18s %-18s\n", name.c_str(), per_rank(r.peak_mem, "%.1f", mib).c_str(),
        per_rank(r.act_peak, "%.2f", mib).c_str(), per_rank(sim_bubble, "%.2f", same).c_str(),
        per_rank(r.sim.peak_in_flight, "%d", [](int x) { return x; }).c_str());
  }
  std::printf(
      "\nbubble = 1 - (F+B+W compute) / runner step (schedule, gradient tail, tied-wte sum; "
      "not the optimizer).\nt_B is the mean full backward (B) or input-gradient part (I), "
      "t_W the mean W; pp rank 0 holds the first stage.\n");
  // Whether the runtime splits backward is read from the measurement, not assumed: with an
  // unsplit backward I runs all of it and W is empty, and the simulator is told exactly that.
  if (const auto zb = g_results.find("zb-h1"); zb != g_results.end()) {
    const Costs& c = zb->second.costs;
    if (c.backward_weight < 0.05 * c.backward_input)
      std::printf(
          "zb-h1: t_W ~ 0: the runtime does not split backward, so its I is a full backward "
          "and its W actions are empty; the simulation uses those costs.\n");
    else
      std::printf(
          "zb-h1: backward is split: I and W are measured separately (I + W = %.2f ms "
          "against a full backward's %.2f ms in 1f1b).\n",
          (c.backward_input + c.backward_weight) * 1e3,
          g_results.count("1f1b") ? g_results.at("1f1b").costs.backward_input * 1e3 : 0.0);
  }
}

}  // namespace
}  // namespace meshtrain::bench

int main(int argc, char** argv) {
  using namespace meshtrain::bench;
  // --microbatches is this program's own flag; the harness parses the rest of the model flags.
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--microbatches=", 15) == 0)
      g_micro_batches = std::stoi(argv[i] + 15);
    else
      argv[kept++] = argv[i];
  }
  argc = kept;
  parse_settings(argc, argv, g_settings);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;

  const BenchSettings& s = g_settings;
  TokenCorpus corpus(s.batch * (s.seq + 1) * 4);  // a few global batches: steps read new data
  g_data_path = corpus.path();
  const std::vector<ScheduleSpec> specs = {{"gpipe"}, {"1f1b"}, {"interleaved", 2}, {"zb-h1"}};
  const meshtrain::GPT2Config model = meshtrain::gpt2_config(*schedule_config(s, specs.front()).model);
  std::printf(
      "pp_train_bench: pp=%d (local backend, rank threads with 1 BLAS thread each), %s "
      "(%.2fM params), batch %lld x seq %lld in %d micro-batches, %d warm-up + %d "
      "measured steps; layers per stage %s (v=1), %s (v=2)\n",
      s.world, model.describe().c_str(), model.num_parameters() / 1e6,
      static_cast<long long>(s.batch), static_cast<long long>(s.seq), g_micro_batches, s.warmup,
      s.steps, balanced_layers(s.layers, s.world).c_str(),
      balanced_layers(s.layers, 2 * s.world).c_str());

  for (const ScheduleSpec& spec : specs)
    register_run("pp/" + spec.name,
                 [spec](benchmark::State& state) { bench_schedule(state, spec); });
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  print_summary();
  return 0;
}
