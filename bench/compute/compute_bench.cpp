// Compute efficiency of one rank: the GPT-2 training step's achieved FLOP/s (model FLOPs / median
// step time through Trainer) against the GEMM library alone at the step's own GEMM shapes, in f32
// (OpenBLAS sgemm; the step computes in f32) and in bf16 (oneDNN; the step runs with FSDP
// param_dtype=bf16: bf16 parameters, activations and gradients, fp32 masters), once with one
// thread and once with all cores, in one run. The GEMMs are timed through the kernels' own helpers
// (meshtrain/core/ops/cpu/blas.h), which split a GEMM's output across the threads.
//
//   compute_bench [--threads=N] [--dim=512] [--layers=6] [--heads=8] [--seq=128] [--batch=8]
//                 [--warmup=2] [--steps=5]
//
// --threads=N measures only N threads (e.g. under taskset -c 0 with N=1); by default 1 and
// the CPUs the process may use (ops::cpu::available_cpus).
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench/compute/step_gemms.h"
#include "bench/train/mode_run.h"
#include "meshtrain/train/trace_output.h"
#include "bench/train/token_corpus.h"
#include "meshtrain/core/comm/local/spawn_ranks.h"
#include "meshtrain/core/error.h"
#include "meshtrain/core/ops/cpu/cpu_threads.h"

namespace meshtrain::bench {
namespace {

struct Measurement {
  int threads = 0;
  DType dtype = DType::f32;
  int rank_threads = 0;         // what the Trainer's rank thread sees
  std::vector<double> gemm_s;   // seconds per call, in step_gemms order
  double gemm_step_gflops = 0.0;  // all of a step's GEMMs: their FLOPs / their summed time
  double gemm_fwd_gflops = 0.0;   // the forward GEMMs only
  double gemm_step_s = 0.0;       // the step's GEMMs back to back under the raw library
  ModeResult step;
};

// One rank on a one-rank data axis, so that FSDP's mixed precision applies; in f32 FSDP's
// parameters are views of its shards and the step is the plain single-rank step.
ModeSpec step_spec(DType dtype) {
  ModeSpec spec{std::string(dtype_name(dtype)), MeshLayout({{"dp_shard", 1}}), {}};
  if (dtype == DType::bf16) spec.strategies["fsdp"]["param_dtype"] = "bf16";
  return spec;
}

// Consumes --threads=N; every other argument is left in argv.
int take_threads(int& argc, char** argv) {
  int threads = 0, kept = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--threads=", 10) == 0)
      threads = std::stoi(argv[i] + 10);
    else
      argv[kept++] = argv[i];
  }
  argc = kept;
  return threads;
}

Measurement measure(int threads, DType dtype, const BenchSettings& s, const std::string& data_path,
                    const std::vector<StepGemm>& gemms) {
  Measurement r;
  r.threads = threads;
  r.dtype = dtype;
  ops::cpu::set_cpu_threads(threads);
  // spawn_ranks keeps the caller's count for a single rank; confirm from the rank's own thread.
  spawn_ranks(1, [&](RankContext&) { r.rank_threads = ops::cpu::cpu_threads(); });
  double flops = 0.0, fwd_flops = 0.0, fwd_s = 0.0;
  for (const StepGemm& g : gemms) {
    const double sec = gemm_seconds(g, dtype);
    r.gemm_s.push_back(sec);
    flops += g.flops() * g.per_step;
    r.gemm_step_s += sec * g.per_step;
    if (g.forward) {
      fwd_flops += g.flops() * g.per_step;
      fwd_s += sec * g.per_step;
    }
  }
  r.gemm_step_gflops = 1e-9 * flops / r.gemm_step_s;
  r.gemm_fwd_gflops = 1e-9 * fwd_flops / fwd_s;
  r.step = run_mode(s, step_spec(dtype), data_path);
  return r;
}

std::string label(const Measurement& r) {
  return std::string(dtype_name(r.dtype)) + "@" + std::to_string(r.threads);
}

void print_gemms(const std::vector<StepGemm>& gemms, const std::vector<Measurement>& results) {
  std::printf("\nGEMM GFLOP/s (f32: OpenBLAS sgemm, bf16: oneDNN) at dtype@threads\n");
  std::printf("%-20s %-3s %16s %9s", "gemm", "op", "m x n x k", "per step");
  for (const Measurement& r : results) std::printf(" %9s", label(r).c_str());
  std::printf("\n");
  for (size_t i = 0; i < gemms.size(); ++i) {
    const StepGemm& g = gemms[i];
    const std::string op = std::string(g.trans_a ? "T" : "N") + (g.trans_b ? "T" : "N");
    const std::string shape =
        std::to_string(g.m) + "x" + std::to_string(g.n) + "x" + std::to_string(g.k);
    std::printf("%-20s %-3s %16s %9lld", g.name.c_str(), op.c_str(), shape.c_str(),
                static_cast<long long>(g.per_step));
    for (const Measurement& r : results) std::printf(" %9.1f", 1e-9 * g.flops() / r.gemm_s[i]);
    std::printf("\n");
  }
}

void print_summary(const std::vector<Measurement>& results, double model_gflop) {
  std::printf("\n%7s %5s %12s %9s %13s %12s %8s %10s %10s %11s %10s %7s\n", "threads", "dtype",
              "rank threads", "gemm fwd", "gemm step mix", "gemm s/step", "step ms", "cpu s/step",
              "step GF/s", "step/gemm", "vs f32", "loss");
  for (const Measurement& r : results) {
    const double step_gflops = model_gflop / r.step.step_s;
    // The f32 step at the same thread count, measured in this run.
    double f32_step_s = 0.0;
    for (const Measurement& o : results)
      if (o.threads == r.threads && o.dtype == DType::f32) f32_step_s = o.step.step_s;
    std::printf("%7d %5s %12d %9.1f %13.1f %12.3f %8.1f %10.2f %10.1f %11.3f %10.3f %7.4f\n",
                r.threads, std::string(dtype_name(r.dtype)).c_str(), r.rank_threads,
                r.gemm_fwd_gflops, r.gemm_step_gflops, r.gemm_step_s, r.step.step_s * 1e3,
                r.step.cpu_s, step_gflops, step_gflops / r.gemm_step_gflops,
                f32_step_s > 0 ? r.step.step_s / f32_step_s : 0.0, r.step.final_loss);
  }
}

}  // namespace
}  // namespace meshtrain::bench

int main(int argc, char** argv) {
  using namespace meshtrain;
  using namespace meshtrain::bench;
  BenchSettings s;
  s.world = 1;
  s.seq = 128;
  s.batch = 8;
  const int only_threads = take_threads(argc, argv);
  parse_settings(argc, argv, s);
  MT_CHECK(argc == 1, "unknown argument ", argc > 1 ? argv[1] : "");
  MT_CHECK(s.world == 1, "compute_bench measures one rank: --world must be 1, got ", s.world);

  TokenCorpus corpus(s.batch * (s.seq + 1) * 4);
  const ModelSpecPtr spec = make_train_config(s, step_spec(DType::f32), corpus.path()).model;
  const GPT2Config model = gpt2_config(*spec);
  const std::vector<StepGemm> gemms = step_gemms(model, s.batch, s.seq);

  // Model FLOPs of a step as --profile counts them (ModelSpec::training_flops): 6 * parameters *
  // tokens plus attention's 12 * B * L * T^2 * d, printed as those two terms.
  const double tokens = static_cast<double>(s.batch * s.seq);
  const double model_gflop = 1e-9 * spec->training_flops(static_cast<double>(s.batch * s.seq), s.seq);
  const double param_gflop = 6e-9 * static_cast<double>(model.num_parameters()) * tokens;
  const double attn_gflop = model_gflop - param_gflop;
  double gemm_gflop = 0.0;
  for (const StepGemm& g : gemms) gemm_gflop += 1e-9 * g.flops() * g.per_step;

  std::printf("compute_bench: %s (%.2fM params), batch %lld x seq %lld = %.0f tokens, one rank, "
              "%d warm-up + %d measured steps, f32 and bf16\n",
              model.describe().c_str(), model.num_parameters() / 1e6,
              static_cast<long long>(s.batch), static_cast<long long>(s.seq), tokens, s.warmup,
              s.steps);
  std::printf("model FLOPs/step: 6*params*tokens %.2f GFLOP + attention 12*B*L*T^2*d %.2f GFLOP "
              "= %.2f GFLOP (the step's GEMMs as issued: %.2f GFLOP)\n",
              param_gflop, attn_gflop, model_gflop, gemm_gflop);

  std::vector<int> thread_counts;
  if (only_threads > 0) {
    thread_counts = {only_threads};
  } else {
    thread_counts = {1};
    const int all = ops::cpu::available_cpus();
    if (all > 1) thread_counts.push_back(all);
  }
  std::vector<Measurement> results;
  for (const int t : thread_counts)
    for (const DType dtype : {DType::f32, DType::bf16})
      results.push_back(measure(t, dtype, s, corpus.path(), gemms));

  print_gemms(gemms, results);
  print_summary(results, model_gflop);
  std::printf("\ngemm step mix = every GEMM of a step (FLOP-weighted) in the row's dtype; gemm fwd "
              "= the forward ones; step GF/s = model FLOPs / median step time; step/gemm = step "
              "GF/s / gemm step mix; vs f32 = step time / the f32 step time at the same threads."
              "\n");
  return 0;
}
