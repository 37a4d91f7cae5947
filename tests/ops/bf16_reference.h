// References for bf16 GEMM results: bf16 copies of f32 tensors, double-precision products, and a
// comparison that allows the one bf16 rounding of the output plus the f32 accumulation's error.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "meshtrain/core/ops/ops.h"
#include "meshtrain/core/tensor.h"

namespace meshtrain::test {

inline Tensor bf16_copy(const Tensor& t) {
  const Tensor out = Tensor::empty(t.shape(), DType::bf16);
  ops::cast(out, t);
  return out;
}

// A bf16 tensor widened to f32 (exactly): the values a bf16 kernel computes from.
inline Tensor f32_copy(const Tensor& t) {
  const Tensor out = Tensor::empty(t.shape(), DType::f32);
  ops::cast(out, t);
  return out;
}

// op(a)[m, k] @ op(b)[k, n] in double, from the stored (possibly transposed) layouts.
inline std::vector<double> reference_product(const std::vector<float>& a,
                                             const std::vector<float>& b, int64_t m, int64_t k,
                                             int64_t n, bool trans_a, bool trans_b) {
  std::vector<double> out(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t p = 0; p < k; ++p)
        out[i * n + j] += static_cast<double>(trans_a ? a[p * m + i] : a[i * k + p]) *
                          (trans_b ? b[j * k + p] : b[p * n + j]);
  return out;
}

inline void expect_bf16_near(const Tensor& actual, const std::vector<double>& expected,
                             const std::string& what) {
  ASSERT_EQ(actual.dtype(), DType::bf16) << what;
  const std::vector<float> got = actual.to_vector();
  ASSERT_EQ(got.size(), expected.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], expected[i], std::abs(expected[i]) * 0x1p-8 + 1e-4)
        << what << " at element " << i;
}

}  // namespace meshtrain::test
