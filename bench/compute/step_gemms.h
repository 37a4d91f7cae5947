// The GEMMs of one GPT-2 training step (one rank, no parallelism), as the CPU kernels issue them,
// and their throughput under the raw GEMM libraries: the ceiling for the step's achieved FLOP/s.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "meshtrain/core/dtype.h"
#include "meshtrain/models/gpt2_config.h"

namespace meshtrain::bench {

// c[m, n] = op(a) @ op(b) + beta * c, row-major, issued `per_step` times a step.
struct StepGemm {
  std::string name;
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
  float beta = 0.0f;
  int64_t per_step = 0;
  bool forward = false;

  double flops() const { return 2.0 * static_cast<double>(m * n * k); }
};

// Every linear (c_attn, attn c_proj, c_fc, mlp c_proj, the tied lm head) forward, d_in and
// d_weight over rows = batch * seq tokens, and attention's per-(sequence, head) score and value
// GEMMs forward and backward, with the strides and beta of meshtrain/core/ops/cpu.
std::vector<StepGemm> step_gemms(const GPT2Config& model, int64_t batch, int64_t seq);

// Seconds per call of `g` on its own buffers through the kernels' GEMM helpers (meshtrain/core/ops/cpu/blas.h:
// f32 on OpenBLAS, bf16 on oneDNN, blocks across the calling thread's CPU threads): the median over
// repeated timed loops, after a warm-up call.
double gemm_seconds(const StepGemm& g, DType dtype);

}  // namespace meshtrain::bench
