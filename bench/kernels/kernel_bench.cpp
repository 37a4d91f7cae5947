// The non-GEMM CPU kernels at the shapes of the issue-11 reference model (GPT-2 with V = 256,
// d = 512, H = 8, T = 128, 8 sequences: N = 1024 rows, C = 512, 4C = 2048), for 1 and 2 CPU threads
// (set_cpu_threads) and f32 / bf16 storage. Each kernel reports the "GB" counter (per second) over
// the bytes it must move at least once (reads + writes of its tensors), next to memcpy_GB/s:
// memcpy's rate on the same number of bytes, measured in the same run just before the kernel (a
// memcpy of n bytes moves 2n).
// Attention also reports its GEMMs' rate (the "GFLOP" counter, per second).
//
//   cmake --build build --target kernel_bench -j2
//   taskset -c 0 build/bin/kernel_bench --benchmark_filter='/threads:1'
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "meshtrain/core/ops/adamw_hyper.h"
#include "meshtrain/core/ops/cpu/cpu_threads.h"
#include "meshtrain/core/ops/ops.h"

namespace {

using meshtrain::DType;
using meshtrain::Shape;
using meshtrain::Tensor;
namespace ops = meshtrain::ops;

constexpr int64_t kBatch = 8, kSeq = 128, kRows = kBatch * kSeq, kC = 512, kHeads = 8, kVocab = 256,
                  kLayers = 6;
// Parameters of the reference model (AdamW's and the gradient norm's tensors).
constexpr int64_t kParams = kLayers * (12 * kC * kC + 13 * kC) + (kVocab + kSeq) * kC + 2 * kC;

// Values in [-2, 2): no denormals, no overflow in exp.
Tensor filled(const Shape& shape, DType dtype = DType::f32, uint32_t seed = 1) {
  Tensor t = Tensor::empty(shape);
  float* data = t.data<float>();
  uint32_t x = seed * 2654435761u + 1;
  for (int64_t i = 0; i < t.numel(); ++i) {
    x = x * 1664525u + 1013904223u;
    data[i] = static_cast<float>(x >> 8) * (4.0f / 16777216.0f) - 2.0f;
  }
  if (dtype == DType::f32) return t;
  Tensor narrow = Tensor::empty(shape, dtype);
  ops::cast(narrow, t);
  return narrow;
}

Tensor ids(int64_t count, int64_t vocab) {
  std::vector<int32_t> values(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) values[i] = static_cast<int32_t>((i * 7919) % vocab);
  return Tensor::from_vector(values, {count});
}

int64_t esize(DType dtype) { return dtype == DType::f32 ? 4 : 2; }

// memcpy's GB/s (2 bytes moved per byte copied) over `bytes` in total, best of a few rounds.
double memcpy_gbps(int64_t bytes) {
  const size_t n = static_cast<size_t>(std::max<int64_t>(bytes / 2, 64));
  std::vector<char> src(n, 1), dst(n, 0);
  double best = 0.0;
  for (int round = 0; round < 5; ++round) {
    int reps = 0;
    const auto start = std::chrono::steady_clock::now();
    double elapsed = 0.0;
    do {
      std::memcpy(dst.data(), src.data(), n);
      benchmark::DoNotOptimize(dst.data());
      benchmark::ClobberMemory();
      ++reps;
      elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    } while (elapsed < 0.01);
    best = std::max(best, 2.0 * static_cast<double>(n) * reps / elapsed * 1e-9);
  }
  return best;
}

// One kernel: `setup` builds the tensors for a dtype and returns the call and the bytes it moves.
struct Kernel {
  std::function<void()> call;
  int64_t bytes = 0;
  double flops = 0.0;
};
using Setup = std::function<Kernel(DType)>;

void run(benchmark::State& state, const Setup& setup, DType dtype) {
  ops::cpu::set_cpu_threads(static_cast<int>(state.range(0)));
  Kernel k;
  try {
    k = setup(dtype);
    k.call();  // warm up, and find out whether this dtype is supported
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  const double baseline = memcpy_gbps(k.bytes);
  for (auto _ : state) {
    k.call();
    benchmark::ClobberMemory();
  }
  state.counters["GB"] = benchmark::Counter(static_cast<double>(k.bytes) * 1e-9,
                                            benchmark::Counter::kIsIterationInvariantRate);
  state.counters["memcpy_GB/s"] = baseline;
  if (k.flops > 0)
    state.counters["GFLOP"] =
        benchmark::Counter(k.flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::to_string(k.bytes >> 10) + " KiB");
}

void add(const std::string& name, const Setup& setup, bool bf16 = true) {
  for (const DType dtype : {DType::f32, DType::bf16}) {
    if (dtype == DType::bf16 && !bf16) continue;
    const std::string full = name + "/" + (dtype == DType::f32 ? "f32" : "bf16");
    benchmark::RegisterBenchmark(full.c_str(), run, setup, dtype)
        ->ArgName("threads")
        ->Arg(1)
        ->Arg(2)
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime();
  }
}

void register_all() {
  const Shape rows_c{kRows, kC}, rows_4c{kRows, 4 * kC};
  add("layernorm_forward", [=](DType t) {
    Tensor out = Tensor::empty(rows_c, t), in = filled(rows_c, t), w = filled({kC}, t, 2),
           b = filled({kC}, t, 3), mean = Tensor::empty({kRows}), rstd = Tensor::empty({kRows});
    return Kernel{[=] { ops::layernorm_forward(out, mean, rstd, in, w, b, 1e-5f); },
                  2 * kRows * kC * esize(t) + 8 * kRows};
  });
  add("layernorm_backward", [=](DType t) {
    Tensor in = filled(rows_c, t), w = filled({kC}, t, 2), b = filled({kC}, t, 3),
           out = Tensor::empty(rows_c, t), mean = Tensor::empty({kRows}),
           rstd = Tensor::empty({kRows}), d_out = filled(rows_c, t, 4),
           d_in = Tensor::empty(rows_c, t), dw = Tensor::zeros({kC}, t),
           db = Tensor::zeros({kC}, t);
    ops::layernorm_forward(out, mean, rstd, in, w, b, 1e-5f);
    return Kernel{[=] { ops::layernorm_backward(d_in, dw, db, d_out, in, w, mean, rstd); },
                  3 * kRows * kC * esize(t) + 8 * kRows};
  });
  add("gelu_forward", [=](DType t) {
    Tensor in = filled(rows_4c, t), out = Tensor::empty(rows_4c, t);
    return Kernel{[=] { ops::gelu_forward(out, in); }, 2 * in.numel() * esize(t)};
  });
  add("gelu_backward", [=](DType t) {
    Tensor in = filled(rows_4c, t), d_out = filled(rows_4c, t, 2), d_in = Tensor::empty(rows_4c, t);
    return Kernel{[=] { ops::gelu_backward(d_in, d_out, in); }, 3 * in.numel() * esize(t)};
  });
  // The two products of forward (Q K^T, P V); backward recomputes Q K^T and runs four more.
  const double attention_gemm_flops = 2.0 * kBatch * kHeads * kSeq * kSeq * (kC / kHeads) * 2;
  add("attention_forward", [=](DType t) {
    Tensor qkv = filled({kBatch, kSeq, 3 * kC}, t), out = Tensor::empty({kBatch, kSeq, kC}, t);
    return Kernel{[=] { ops::attention_forward(out, qkv, kHeads); }, 4 * kRows * kC * esize(t),
                  attention_gemm_flops};
  });
  add("attention_backward", [=](DType t) {
    Tensor qkv = filled({kBatch, kSeq, 3 * kC}, t), d_out = filled({kBatch, kSeq, kC}, t, 2),
           d_qkv = Tensor::empty(qkv.shape(), t);
    return Kernel{[=] { ops::attention_backward(d_qkv, d_out, qkv, kHeads); },
                  7 * kRows * kC * esize(t), 2.5 * attention_gemm_flops};
  });
  const Shape logits_shape{kRows, kVocab};
  add("cross_entropy_row_max", [=](DType t) {
    Tensor logits = filled(logits_shape, t), row_max = Tensor::empty({kRows});
    return Kernel{[=] { ops::cross_entropy_row_max(row_max, logits); },
                  logits.numel() * esize(t) + 4 * kRows};
  });
  add("cross_entropy_partials", [=](DType t) {
    Tensor logits = filled(logits_shape, t), row_max = Tensor::empty({kRows}),
           sum_exp = Tensor::empty({kRows}), picked = Tensor::empty({kRows}),
           targets = ids(kRows, kVocab);
    ops::cross_entropy_row_max(row_max, logits);
    return Kernel{
        [=] { ops::cross_entropy_partials(sum_exp, picked, logits, targets, row_max, 0); },
        logits.numel() * esize(t) + 16 * kRows};
  });
  add("cross_entropy_backward", [=](DType t) {
    Tensor logits = filled(logits_shape, t), row_max = Tensor::empty({kRows}),
           sum_exp = Tensor::empty({kRows}), picked = Tensor::empty({kRows}),
           targets = ids(kRows, kVocab), d_logits = Tensor::empty(logits_shape, t);
    ops::cross_entropy_row_max(row_max, logits);
    ops::cross_entropy_partials(sum_exp, picked, logits, targets, row_max, 0);
    return Kernel{[=] {
                    ops::cross_entropy_backward(d_logits, logits, targets, row_max, sum_exp, 0,
                                                1.0f / kRows);
                  },
                  2 * logits.numel() * esize(t) + 12 * kRows};
  });
  add("embedding_forward", [=](DType t) {
    Tensor table = filled({kVocab, kC}, t), out = Tensor::empty(rows_c, t),
           tokens = ids(kRows, kVocab);
    return Kernel{[=] { ops::embedding_forward(out, tokens, table, 0); },
                  2 * kRows * kC * esize(t) + 4 * kRows};
  });
  add("embedding_backward", [=](DType t) {
    Tensor d_table = Tensor::zeros({kVocab, kC}, t), d_out = filled(rows_c, t),
           tokens = ids(kRows, kVocab);
    return Kernel{[=] { ops::embedding_backward(d_table, d_out, tokens, 0); },
                  3 * kRows * kC * esize(t) + 4 * kRows};
  });
  add("add", [=](DType t) {
    Tensor a = filled(rows_c, t), b = filled(rows_c, t, 2), out = Tensor::empty(rows_c, t);
    return Kernel{[=] { ops::add(out, a, b); }, 3 * a.numel() * esize(t)};
  });
  add("axpy", [=](DType t) {
    Tensor y = filled(rows_c, t), x = filled(rows_c, t, 2);
    // alpha = 0 keeps y bounded over millions of iterations; the kernel does the same work.
    return Kernel{[=] { ops::axpy(y, 0.0f, x); }, 3 * y.numel() * esize(t)};
  });
  add("scale", [=](DType t) {
    Tensor x = filled(rows_c, t);
    return Kernel{[=] { ops::scale(x, 1.0f); }, 2 * x.numel() * esize(t)};
  });
  add("sum_squares/params", [=](DType t) {
    Tensor x = filled({kParams}, t);
    return Kernel{[=] { benchmark::DoNotOptimize(ops::sum_squares({x})); }, x.numel() * esize(t)};
  });
  add(
      "cast_f32_to_bf16/params",
      [=](DType) {
        Tensor in = filled({kParams}), out = Tensor::empty({kParams}, DType::bf16);
        return Kernel{[=] { ops::cast(out, in); }, 6 * kParams};
      },
      false);
  add(
      "cast_bf16_to_f32/params",
      [=](DType) {
        Tensor in = filled({kParams}, DType::bf16), out = Tensor::empty({kParams});
        return Kernel{[=] { ops::cast(out, in); }, 6 * kParams};
      },
      false);
  add(
      "adamw_step/params",
      [=](DType) {
        Tensor p = filled({kParams}), g = filled({kParams}, DType::f32, 2),
               m = Tensor::zeros({kParams}), v = Tensor::zeros({kParams});
        auto step = std::make_shared<int64_t>(0);
        return Kernel{[=] { ops::adamw_step(p, g, m, v, ops::AdamWHyper{}, ++*step); },
                      28 * kParams};
      },
      false);
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
