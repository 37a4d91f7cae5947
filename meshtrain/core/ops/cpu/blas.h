// Row-major GEMMs on raw pointers, shared by the CPU kernels that multiply: f32 through OpenBLAS,
// bf16 through oneDNN (fp32 accumulation; AVX512-BF16 instructions where the CPU has them), or,
// on a CPU oneDNN has no bf16 matmul for (before AVX-512), through OpenBLAS on widened copies.
#pragma once

#include <cstdint>

#include "meshtrain/core/bf16.h"
#include "meshtrain/core/dtype.h"

namespace meshtrain::ops::cpu {

// c[m, n] = alpha * op(a) @ op(b) + beta * c; lda/ldb/ldc are row strides in elements.
void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// The same product with bf16 operands, accumulated in f32 and written to c as c_dtype (bf16 or
// f32; beta != 0 reads c in that dtype). bias, when given, is a bf16 [n] added to every row.
void bf16_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
               const BF16* a, int64_t lda, const BF16* b, int64_t ldb, float beta, void* c,
               DType c_dtype, int64_t ldc, const BF16* bias = nullptr);

// bf16_gemm's path where oneDNN has no bf16 matmul: the operands widened to f32 (exactly) and
// multiplied by sgemm, then alpha x a @ b + bias + beta x c rounded once into c_dtype. Declared
// for its tests, which run it on every CPU.
void widened_bf16_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                       const BF16* a, int64_t lda, const BF16* b, int64_t ldb, float beta, void* c,
                       DType c_dtype, int64_t ldc, const BF16* bias = nullptr);

}  // namespace meshtrain::ops::cpu
