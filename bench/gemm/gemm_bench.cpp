// GFLOP/s of ops::linear_forward next to the raw cblas_sgemm it is built on, at the GEMM shapes of
// GPT-2 small (c_attn 768->2304, attn c_proj 768->768, mlp c_fc 768->3072, mlp c_proj 3072->768)
// for N = B*T = 8*256 and 4*1024 rows, with single-threaded BLAS (one rank per core).
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <string>

#include "meshtrain/core/ops/cpu/cpu_threads.h"
#include "meshtrain/core/ops/ops.h"

namespace {

using meshtrain::Shape;
using meshtrain::Tensor;

struct GemmShape {
  int64_t rows, in, out;
};

// Small non-zero values: GEMM speed does not depend on them, but denormals would slow it down.
Tensor filled(const Shape& shape) {
  Tensor t = Tensor::empty(shape);
  float* data = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) data[i] = 0.01f * static_cast<float>(i % 97 - 48);
  return t;
}

void count_flops(benchmark::State& state, const GemmShape& s) {
  state.counters["GFLOP/s"] = benchmark::Counter(2e-9 * static_cast<double>(s.rows * s.in * s.out),
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

void linear_forward(benchmark::State& state, GemmShape s, bool with_bias) {
  const Tensor in = filled({s.rows, s.in}), weight = filled({s.in, s.out});
  const Tensor bias = with_bias ? filled({s.out}) : Tensor();
  const Tensor out = Tensor::empty({s.rows, s.out});
  for (auto _ : state) {
    meshtrain::ops::linear_forward(out, in, weight, bias);
    benchmark::DoNotOptimize(out.raw_data());
    benchmark::ClobberMemory();
  }
  count_flops(state, s);
}

void raw_sgemm(benchmark::State& state, GemmShape s) {
  const Tensor in = filled({s.rows, s.in}), weight = filled({s.in, s.out});
  const Tensor out = Tensor::empty({s.rows, s.out});
  const int m = static_cast<int>(s.rows), n = static_cast<int>(s.out), k = static_cast<int>(s.in);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, in.data<float>(), k,
                weight.data<float>(), n, 0.0f, out.data<float>(), n);
    benchmark::DoNotOptimize(out.raw_data());
    benchmark::ClobberMemory();
  }
  count_flops(state, s);
}

}  // namespace

int main(int argc, char** argv) {
  meshtrain::ops::cpu::set_cpu_threads(1);
  const GemmShape shapes[] = {{2048, 768, 2304}, {2048, 768, 768},  {2048, 768, 3072},
                              {2048, 3072, 768}, {4096, 768, 2304}, {4096, 768, 768},
                              {4096, 768, 3072}, {4096, 3072, 768}};
  // Each shape's variants run back to back so that they see the same machine load.
  for (const GemmShape& s : shapes) {
    const std::string name = "/N:" + std::to_string(s.rows) + "/in:" + std::to_string(s.in) +
                             "/out:" + std::to_string(s.out);
    benchmark::RegisterBenchmark(("cblas_sgemm" + name).c_str(), raw_sgemm, s)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("linear_forward+bias" + name).c_str(), linear_forward, s, true)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("linear_forward" + name).c_str(), linear_forward, s, false)
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
