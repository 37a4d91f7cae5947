// Row-major GEMMs through cuBLAS, which is column-major: a row-major matrix with row stride ld is
// its own transpose there, so row-major C = op(A) op(B) is computed as C^T = op(B)^T op(A)^T.
#include <limits>

#include "meshtrain/core/ops/cuda/gemm.h"
#include "meshtrain/core/ops/cuda/kernel_utils.cuh"

namespace meshtrain::ops::cuda {

namespace {

cudaDataType_t cuda_type(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return CUDA_R_32F;
    case DType::bf16:
      return CUDA_R_16BF;
    default:
      throw NotSupported(detail::concat("gemm: f32 or bf16 operands, got ", dtype_name(dtype)));
  }
}

int as_int(int64_t value, const char* what) {
  MT_CHECK(value <= std::numeric_limits<int>::max(), "gemm: ", what, " = ", value,
           " exceeds cuBLAS's 32-bit sizes");
  return static_cast<int>(value);
}

// c = beta * c over a batch of row-major m x n matrices (the k == 0 product is empty).
template <typename T>
struct ScaleMatrices {
  T* c;
  int64_t m, n, ld, stride;
  float beta;
  __device__ void operator()(int64_t i) const {
    const int64_t col = i % n, row = (i / n) % m, matrix = i / (n * m);
    T& x = c[matrix * stride + row * ld + col];
    x = from_float<T>(beta == 0.0f ? 0.0f : beta * as_float(x));  // beta == 0 ignores NaN in c
  }
};

}  // namespace

void gemm(int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b, float alpha,
          const GemmMatrix& a, const GemmMatrix& b, float beta, const GemmMatrix& c,
          int64_t batch) {
  if (m == 0 || n == 0 || batch == 0) return;
  if (k == 0) {
    dispatch_float(c.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      launch_elementwise(batch * m * n, ScaleMatrices<T>{static_cast<T*>(c.data), m, n, c.ld,
                                                         c.batch_stride, beta});
    });
    return;
  }
  MT_ASSERT(a.dtype == b.dtype, "gemm: a and b must share a dtype, got ", dtype_name(a.dtype),
            " and ", dtype_name(b.dtype));
  MT_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      cublas_handle(), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
      as_int(n, "n"), as_int(m, "m"), as_int(k, "k"), &alpha, b.data, cuda_type(b.dtype),
      as_int(b.ld, "ldb"), b.batch_stride, a.data, cuda_type(a.dtype), as_int(a.ld, "lda"),
      a.batch_stride, &beta, c.data, cuda_type(c.dtype), as_int(c.ld, "ldc"), c.batch_stride,
      as_int(batch, "batch"), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace meshtrain::ops::cuda
