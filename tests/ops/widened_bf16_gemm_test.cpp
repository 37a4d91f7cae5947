// bf16_gemm's path for CPUs that oneDNN has no bf16 matmul for (before AVX-512), run here on every
// CPU: against the double-precision product of the bf16 inputs, for every transpose, strided
// operands, a bias, beta and both output dtypes.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <tuple>
#include <vector>

#include "meshtrain/core/bf16.h"
#include "meshtrain/core/ops/cpu/blas.h"

namespace meshtrain {
namespace {

// A [rows, cols] operand stored with row stride cols + pad, filled with bf16 values.
struct Operand {
  int64_t rows, cols, ld;
  std::vector<BF16> data;

  Operand(int64_t r, int64_t c, int64_t pad, unsigned seed) : rows(r), cols(c), ld(c + pad) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> value(-1, 1);
    for (int64_t i = 0; i < rows * ld; ++i) data.push_back(to_bf16(value(rng)));
  }
  double at(int64_t r, int64_t c) const { return to_f32(data[r * ld + c]); }
};

using Params = std::tuple<bool, bool, DType>;  // trans_a, trans_b, the output's dtype

class WidenedBf16Gemm : public ::testing::TestWithParam<Params> {};

// 33 rows, and 549: c is computed in blocks of 256 rows.
TEST_P(WidenedBf16Gemm, IsTheProductOfTheBf16InputsRoundedOnce) {
  const auto [ta, tb, c_dtype] = GetParam();
  const int64_t n = 45, k = 29, ldc = n + 2;
  const Operand b = tb ? Operand(n, k, 5, 2) : Operand(k, n, 5, 2);
  const Operand bias(1, n, 0, 3);
  for (const int64_t m : {33, 549})
    for (const bool with_bias : {false, true}) {
      const Operand a = ta ? Operand(k, m, 3, 1) : Operand(m, k, 3, 1);
      // A bias goes with alpha 1, as the linear layer passes it.
      const float alpha = with_bias ? 1.0f : 0.5f, beta = 2.0f;
      const Operand before(m, n, ldc - n, 4);
      std::vector<float> c32(static_cast<size_t>(m * ldc));
      std::vector<BF16> c16 = before.data;
      for (size_t i = 0; i < c32.size(); ++i) c32[i] = to_f32(before.data[i]);
      void* c = c_dtype == DType::f32 ? static_cast<void*>(c32.data()) : c16.data();
      ops::cpu::widened_bf16_gemm(ta, tb, m, n, k, alpha, a.data.data(), a.ld, b.data.data(), b.ld,
                                  beta, c, c_dtype, ldc, with_bias ? bias.data.data() : nullptr);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double product = 0;
          for (int64_t p = 0; p < k; ++p)
            product += (ta ? a.at(p, i) : a.at(i, p)) * (tb ? b.at(j, p) : b.at(p, j));
          const double expected =
              alpha * product + (with_bias ? bias.at(0, j) : 0.0) + beta * before.at(i, j);
          const double got = c_dtype == DType::f32 ? c32[i * ldc + j] : to_f32(c16[i * ldc + j]);
          // f32 accumulation over k = 29 terms; a bf16 output adds its one rounding.
          const double tolerance =
              (c_dtype == DType::f32 ? 1e-5 : std::abs(expected) * 0x1p-8 + 1e-4);
          ASSERT_NEAR(got, expected, tolerance) << "element (" << i << ", " << j << ") of " << m
                                                << " rows" << (with_bias ? " with a bias" : "");
        }
      // The padding between rows stays as it was.
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = n; j < ldc; ++j)
          ASSERT_EQ(c_dtype == DType::f32 ? c32[i * ldc + j] : to_f32(c16[i * ldc + j]),
                    before.at(i, j));
    }
}

INSTANTIATE_TEST_SUITE_P(Layouts, WidenedBf16Gemm,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool(),
                                            ::testing::Values(DType::f32, DType::bf16)));

// beta = 0 never reads c: NaN there does not reach the output.
TEST(WidenedBf16GemmEdges, BetaZeroIgnoresWhatCHeld) {
  const std::vector<BF16> a = {to_bf16(1), to_bf16(2)}, b = {to_bf16(3), to_bf16(4)};
  std::vector<float> c = {std::nanf("")};
  ops::cpu::widened_bf16_gemm(false, false, 1, 1, 2, 1.0f, a.data(), 2, b.data(), 1, 0.0f,
                              c.data(), DType::f32, 1);
  EXPECT_EQ(c[0], 11.0f);
}

}  // namespace
}  // namespace meshtrain
