// The matmul kernel (f32 on OpenBLAS, bf16 on oneDNN) and the shared OpenBLAS sgemm helper.
#include <cblas.h>

#include <algorithm>
#include <limits>

#include "meshtrain/core/error.h"
#include "meshtrain/core/ops/cpu/blas.h"
#include "meshtrain/core/ops/cpu/cpu_ops.h"
#include "meshtrain/core/ops/cpu/gemm_blocks.h"

namespace meshtrain::ops::cpu {

namespace {
blasint blas_int(int64_t value) {
  MT_CHECK(value <= std::numeric_limits<blasint>::max(), "GEMM dimension ", value,
           " exceeds the range of this OpenBLAS build");
  return static_cast<blasint>(value);
}
}  // namespace

void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  // OpenBLAS stays single-threaded (process-wide); for_gemm_blocks spreads the blocks instead.
  static const bool single_threaded = (openblas_set_num_threads(1), true);
  (void)single_threaded;
  for_gemm_blocks(m, n, k, [&](int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
    // BLAS requires leading dimensions >= 1 even when a dimension is empty.
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, blas_int(i1 - i0), blas_int(j1 - j0),
                blas_int(k), alpha, trans_a ? a + i0 : a + i0 * lda,
                blas_int(std::max<int64_t>(lda, 1)), trans_b ? b + j0 * ldb : b + j0,
                blas_int(std::max<int64_t>(ldb, 1)), beta, c + i0 * ldc + j0,
                blas_int(std::max<int64_t>(ldc, 1)));
  });
}

void matmul(const Tensor& out, const Tensor& a, const Tensor& b, bool trans_a, bool trans_b,
            float alpha, float beta) {
  const int64_t k = trans_a ? a.dim(0) : a.dim(1);
  if (a.dtype() == DType::bf16) {
    bf16_gemm(trans_a, trans_b, out.dim(0), out.dim(1), k, alpha, a.data<BF16>(), a.dim(1),
              b.data<BF16>(), b.dim(1), beta, out.data<BF16>(), DType::bf16, out.dim(1));
    return;
  }
  sgemm(trans_a, trans_b, out.dim(0), out.dim(1), k, alpha, a.data<float>(), a.dim(1),
        b.data<float>(), b.dim(1), beta, out.data<float>(), out.dim(1));
}

}  // namespace meshtrain::ops::cpu
