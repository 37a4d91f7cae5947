// Row-major single-precision GEMM on raw pointers, shared by the CPU kernels that multiply.
#pragma once

#include <cstdint>

namespace meshtrain::ops::cpu {

// c[m, n] = alpha * op(a) @ op(b) + beta * c; lda/ldb/ldc are row strides in elements.
void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

}  // namespace meshtrain::ops::cpu
