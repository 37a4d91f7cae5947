// GPU training benchmark, in one run:
//   1. GPT-2 124M (V=50257, T=1024, d=768, 12 blocks of 12 heads) on one GPU, f32 and bf16
//      compute (FSDP param_dtype), reporting tokens/s, achieved model FLOP/s and MFU against the
//      GPU's published dense peak of the dtype (meshtrain/train/device_peak.h; H100/H200 SXM:
//      989 TFLOP/s bf16 on tensor cores with fp32 accumulation, 67 TFLOP/s fp32 without TF32,
//      as the f32 GEMMs compute in full fp32). FLOPs per step
//      (ModelSpec::training_flops): 6 N tokens for the weights, N counting
//      every parameter (the position table too), plus 12 B L T^2 d for attention's two products
//      over the full T x T. That attention term is nanoGPT's and PaLM's; nanoGPT leaves the
//      position table out of N (0.5% fewer FLOPs here), and counting only the causal half of
//      attention, as some do, gives 6.6% fewer at T=1024: compare MFUs on one convention.
//   2. The same model at W ranks sharing the GPU (the local backend over device memory): FSDP
//      full against none (unsharded, DDP), bf16, reporting the step-time ratio and the time the
//      ranks spent blocked in Work::wait per step. Sharing one GPU, that wait also holds the
//      other ranks' queued kernels (a collective moves data once every rank's stream reached it),
//      so it bounds the exposed communication from above.
//   3. A short profiled bf16 run on one GPU (the trainer's --profile): time per kernel, each
//      kernel timed to its end on the device, to show where the step goes.
//
//   gpu_train_bench [--batch=8] [--world=4] [--warmup=2] [--steps=5] [--seq=1024] [--dim=768]
//                   [--layers=12] [--heads=12] [--vocab=50257] [--device=cuda]
//                   [--benchmark_filter=...]
// (--device=cpu with a small model runs the same harness on the host, as a check of the program.)
#include <benchmark/benchmark.h>

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "meshtrain/train/run_training.h"
#include "meshtrain/train/trace_output.h"
#include "bench/train/mode_run.h"
#include "bench/train/token_corpus.h"
#include "meshtrain/core/device_memory.h"
#include "meshtrain/train/device_peak.h"

namespace meshtrain::bench {
namespace {

// The published dense peak of this machine's first GPU for `dtype`; 0 when not known.
double peak_flops(DType dtype) { return published_dense_peak_flops(cuda_device_name(0), dtype); }

BenchSettings g_single;  // one rank
BenchSettings g_sharded;  // W ranks on the same GPU
std::string g_data_path;
ModeBoard g_precision("f32");
ModeBoard g_fsdp("none");

std::map<std::string, TextOptions> fsdp(const char* mode, const char* param_dtype) {
  return {{"fsdp", {{"mode", mode}, {"param_dtype", param_dtype}}}};
}

double flops_per_step(const BenchSettings& s) {
  return gpt2_model(GPT2Config{s.vocab, s.seq, s.dim, s.layers, s.heads})
      ->training_flops(static_cast<double>(s.batch * s.seq), s.seq);
}

void print_tables() {
  const double flops = flops_per_step(g_single);
  std::printf(
      "\none GPU (%s), %.3g model FLOP per step; MFU against the dtype's published dense peak "
      "(bf16 %.0f, f32 %.0f TFLOP/s; 0: not known)\n%-6s %10s %9s %10s %8s %14s\n",
      cuda_device_name(0).c_str(), flops, peak_flops(DType::bf16) / 1e12,
      peak_flops(DType::f32) / 1e12, "dtype", "tok/s", "step ms", "TFLOP/s", "MFU", "peak MiB");
  for (const std::string& name : g_precision.order) {
    const ModeResult& r = g_precision.results.at(name);
    const double achieved = flops / r.step_s;
    const double peak = peak_flops(name == "bf16" ? DType::bf16 : DType::f32);
    char mfu[16] = "-";
    if (peak > 0) std::snprintf(mfu, sizeof mfu, "%.1f%%", 100.0 * achieved / peak);
    std::printf("%-6s %10.0f %9.1f %10.1f %8s %14.0f\n", name.c_str(), r.tokens_per_s,
                r.step_s * 1e3, achieved / 1e12, mfu, r.peak_mem_bytes / kMiB);
  }
  const ModeResult* none = g_fsdp.base();
  std::printf(
      "\nW=%d ranks on one GPU, bf16 (wait: time blocked in Work::wait, which bounds the "
      "exposed communication from above)\n%-6s %10s %9s %9s %12s %14s %16s\n",
      g_sharded.world, "mode", "tok/s", "step ms", "vs none", "wait ms", "peak MiB/rank",
      "sharded MiB/rank");
  for (const std::string& name : g_fsdp.order) {
    const ModeResult& r = g_fsdp.results.at(name);
    char ratio[16] = "-";
    if (none) std::snprintf(ratio, sizeof ratio, "%.3f", r.step_s / none->step_s);
    std::printf("%-6s %10.0f %9.1f %9s %12.1f %14.0f %16.0f\n", name.c_str(), r.tokens_per_s,
                r.step_s * 1e3, ratio, r.exposed_comm_s * 1e3, r.peak_mem_bytes / kMiB,
                r.sharded_state_bytes / kMiB);
  }
}

void register_mode(const BenchSettings& settings, ModeSpec spec, ModeBoard& board,
                   const std::string& prefix) {
  register_run(prefix + spec.name, [&settings, &board, spec](benchmark::State& state) {
    bench_mode(state, settings, spec, g_data_path, board);
  });
}

}  // namespace
}  // namespace meshtrain::bench

int main(int argc, char** argv) {
  using namespace meshtrain;
  using namespace meshtrain::bench;
  BenchSettings s;
  s.vocab = 50257;
  s.seq = 1024;
  s.dim = 768;
  s.layers = 12;
  s.heads = 12;
  s.batch = 8;
  s.device = DeviceKind::cuda;
  parse_settings(argc, argv, s);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  if (s.device == DeviceKind::cuda && cuda_device_count() == 0) {
    std::fprintf(stderr, "gpu_train_bench: no CUDA device is visible\n");
    return 1;
  }
  g_single = s;
  g_single.world = 1;
  g_sharded = s;

  TokenCorpus corpus(s.batch * (s.seq + 1) * 4);
  g_data_path = corpus.path();
  const GPT2Config model{s.vocab, s.seq, s.dim, s.layers, s.heads};
  std::printf("gpu_train_bench: GPT-2 %s (%.1fM params), batch %lld x seq %lld, %d warm-up + %d "
              "measured steps\n",
              model.describe().c_str(), model.num_parameters() / 1e6,
              static_cast<long long>(s.batch), static_cast<long long>(s.seq), s.warmup, s.steps);

  const MeshLayout one({{"dp_shard", 1}});
  const MeshLayout shared({{"dp_shard", s.world}});
  register_mode(g_single, {"f32", one, fsdp("none", "f32")}, g_precision, "one_gpu/");
  register_mode(g_single, {"bf16", one, fsdp("none", "bf16")}, g_precision, "one_gpu/");
  register_mode(g_sharded, {"none", shared, fsdp("none", "bf16")}, g_fsdp, "shared_gpu/");
  register_mode(g_sharded, {"full", shared, fsdp("full", "bf16")}, g_fsdp, "shared_gpu/");
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  print_tables();

  std::printf("\nprofile: one GPU, bf16, 4 steps\n");
  TrainConfig profiled =
      make_train_config(g_single, {"bf16", one, fsdp("none", "bf16")}, g_data_path);
  profiled.steps = 4;
  profiled.profile = true;
  profiled.quiet = false;
  std::fflush(stdout);
  run_training(profiled, std::cout, false);
  return 0;
}
