// Row-major (batched) GEMM on cuBLAS with f32 accumulation, shared by matmul, linear and attention
// (private to meshtrain/core/ops/cuda).
#pragma once

#include <cstdint>

#include "meshtrain/core/dtype.h"

namespace meshtrain::ops::cuda {

// A row-major matrix operand: the first matrix, its element type, its row stride (in elements) and
// the distance between consecutive matrices of a batch.
struct GemmMatrix {
  void* data;
  DType dtype;
  int64_t ld;
  int64_t batch_stride = 0;
};

// For i < batch: c[i] (m x n) = alpha * op(a[i]) @ op(b[i]) + beta * c[i], op = transpose when the
// flag is set. a and b share a dtype (f32 or bf16); c is f32 or bf16; products accumulate in f32.
// With beta == 0, c is not read.
void gemm(int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b, float alpha,
          const GemmMatrix& a, const GemmMatrix& b, float beta, const GemmMatrix& c,
          int64_t batch = 1);

}  // namespace meshtrain::ops::cuda
