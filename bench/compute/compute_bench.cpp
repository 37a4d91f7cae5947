// Compute efficiency of one rank: the GPT-2 training step's achieved FLOP/s (model FLOPs / median
// step time through Trainer) against raw cblas_sgemm at the step's own GEMM shapes, once with one
// BLAS thread and once with all cores, in one run. f32 only.
//
//   compute_bench [--threads=N] [--dim=512] [--layers=6] [--heads=8] [--seq=128] [--batch=8]
//                 [--warmup=2] [--steps=5]
//
// --threads=N measures only N BLAS threads (e.g. under taskset -c 0 with N=1); by default 1 and
// std::thread::hardware_concurrency().
#include <cblas.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bench/compute/step_gemms.h"
#include "bench/train/mode_run.h"
#include "bench/train/token_corpus.h"
#include "core/comm/local/spawn_ranks.h"
#include "core/error.h"
#include "core/ops/cpu/cpu_threads.h"

namespace meshtrain::bench {
namespace {

struct ThreadsResult {
  int threads = 0;
  int rank_blas_threads = 0;  // what the Trainer's rank thread sees
  std::vector<double> gemm_s;  // sgemm seconds per call, in step_gemms order
  double sgemm_step_gflops = 0.0;  // all of a step's GEMMs: their FLOPs / their summed time
  double sgemm_fwd_gflops = 0.0;   // the forward GEMMs only
  double sgemm_step_s = 0.0;       // the step's GEMMs back to back under raw sgemm
  ModeResult step;
};

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

ThreadsResult measure(int threads, const BenchSettings& s, const ModeSpec& spec,
                      const std::string& data_path, const std::vector<StepGemm>& gemms) {
  ThreadsResult r;
  r.threads = threads;
  ops::cpu::set_cpu_threads(threads);
  // spawn_ranks only forces one BLAS thread when world > 1; confirm from the rank's own thread.
  spawn_ranks(1, [&](RankContext&) { r.rank_blas_threads = openblas_get_num_threads(); });
  double flops = 0.0, fwd_flops = 0.0, fwd_s = 0.0;
  for (const StepGemm& g : gemms) {
    const double sec = sgemm_seconds(g);
    r.gemm_s.push_back(sec);
    flops += g.flops() * g.per_step;
    r.sgemm_step_s += sec * g.per_step;
    if (g.forward) {
      fwd_flops += g.flops() * g.per_step;
      fwd_s += sec * g.per_step;
    }
  }
  r.sgemm_step_gflops = 1e-9 * flops / r.sgemm_step_s;
  r.sgemm_fwd_gflops = 1e-9 * fwd_flops / fwd_s;
  r.step = run_mode(s, spec, data_path);
  return r;
}

void print_gemms(const std::vector<StepGemm>& gemms, const std::vector<ThreadsResult>& results) {
  std::printf("\n%-20s %-3s %16s %9s", "sgemm", "op", "m x n x k", "per step");
  for (const ThreadsResult& r : results)
    std::printf(" %9s", ("GF/s@" + std::to_string(r.threads)).c_str());
  std::printf("\n");
  for (size_t i = 0; i < gemms.size(); ++i) {
    const StepGemm& g = gemms[i];
    const std::string op = std::string(g.trans_a ? "T" : "N") + (g.trans_b ? "T" : "N");
    const std::string shape =
        std::to_string(g.m) + "x" + std::to_string(g.n) + "x" + std::to_string(g.k);
    std::printf("%-20s %-3s %16s %9lld", g.name.c_str(), op.c_str(), shape.c_str(),
                static_cast<long long>(g.per_step));
    for (const ThreadsResult& r : results) std::printf(" %9.1f", 1e-9 * g.flops() / r.gemm_s[i]);
    std::printf("\n");
  }
}

void print_summary(const std::vector<ThreadsResult>& results, double model_gflop) {
  std::printf("\n%7s %12s %13s %14s %13s %8s %10s %10s %12s %12s %7s\n", "threads",
              "rank threads", "sgemm fwd", "sgemm step mix", "sgemm s/step", "step ms",
              "cpu s/step", "step GF/s", "step/sgemm", "step/fwd", "loss");
  for (const ThreadsResult& r : results) {
    const double step_gflops = model_gflop / r.step.step_s;
    std::printf("%7d %12d %13.1f %14.1f %13.3f %8.1f %10.2f %10.1f %12.3f %12.3f %7.4f\n",
                r.threads, r.rank_blas_threads, r.sgemm_fwd_gflops, r.sgemm_step_gflops,
                r.sgemm_step_s, r.step.step_s * 1e3, r.step.cpu_s, step_gflops,
                step_gflops / r.sgemm_step_gflops, step_gflops / r.sgemm_fwd_gflops,
                r.step.final_loss);
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
  MT_CHECK_EQ(argc, 1, "unknown argument ", argc > 1 ? argv[1] : "");
  MT_CHECK_EQ(s.world, 1, "compute_bench measures one rank: --world must be 1");

  TokenCorpus corpus(s.batch * (s.seq + 1) * 4);
  const ModeSpec spec{"single", MeshLayout(), {}};  // no mesh axes: one rank, no parallelism
  const GPT2Config model = make_train_config(s, spec, corpus.path()).model;
  const std::vector<StepGemm> gemms = step_gemms(model, s.batch, s.seq);

  // Model FLOPs of a step: 6 * parameters * tokens (forward 2, backward 4 per parameter and
  // token; this counts every parameter, including wpe, biases and LayerNorms that do no matmul),
  // plus attention's QK^T and PV matmuls over the full T x T (as the kernel computes them, no
  // causal saving): forward 2 * 2 * B * T^2 * d per layer, backward twice that,
  // 12 * B * L * T^2 * d in all. Softmax, GELU, LayerNorm, cross-entropy and AdamW are not counted.
  const double tokens = static_cast<double>(s.batch * s.seq);
  const double param_gflop = 6e-9 * static_cast<double>(model.num_parameters()) * tokens;
  const double attn_gflop = 12e-9 * static_cast<double>(s.batch * model.layers * s.seq * s.seq *
                                                        model.dim);
  const double model_gflop = param_gflop + attn_gflop;
  double gemm_gflop = 0.0;
  for (const StepGemm& g : gemms) gemm_gflop += 1e-9 * g.flops() * g.per_step;

  std::printf("compute_bench: %s (%.2fM params), batch %lld x seq %lld = %.0f tokens, one rank, "
              "%d warm-up + %d measured steps, f32\n",
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
    const int all = static_cast<int>(std::thread::hardware_concurrency());
    if (all > 1) thread_counts.push_back(all);
  }
  std::vector<ThreadsResult> results;
  for (const int t : thread_counts) results.push_back(measure(t, s, spec, corpus.path(), gemms));

  print_gemms(gemms, results);
  print_summary(results, model_gflop);
  std::printf("\nsgemm step mix = every GEMM of a step (FLOP-weighted); sgemm fwd = the forward "
              "ones; step GF/s = model FLOPs / median step time; step/sgemm = step GF/s / sgemm "
              "step mix.\n");
  return 0;
}
