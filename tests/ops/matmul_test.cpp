// matmul against a plain triple loop, for every transpose combination, alpha and beta.
#include <gtest/gtest.h>

#include "meshtrain/core/error.h"
#include "meshtrain/core/ops/ops.h"
#include "tests/ops/bf16_reference.h"
#include "tests/ops/test_tensors.h"
#include "tests/support/error_message.h"

namespace meshtrain {
namespace {

using test::random_tensor;

// out = alpha * op(a) op(b) + beta * out0, from the stored layouts.
std::vector<double> naive_matmul(const Tensor& out0, const Tensor& a, const Tensor& b, bool ta,
                                 bool tb, float alpha, float beta) {
  const int64_t m = out0.dim(0), n = out0.dim(1), k = ta ? a.dim(0) : a.dim(1);
  const std::vector<float> av = a.to_vector(), bv = b.to_vector(), cv = out0.to_vector();
  std::vector<double> out(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0.0;
      for (int64_t p = 0; p < k; ++p) {
        const float x = ta ? av[p * m + i] : av[i * k + p];
        const float y = tb ? bv[j * k + p] : bv[p * n + j];
        sum += static_cast<double>(x) * y;
      }
      out[i * n + j] = alpha * sum + beta * cv[i * n + j];
    }
  return out;
}

class OpsMatmul : public ::testing::TestWithParam<std::tuple<bool, bool>> {};

TEST_P(OpsMatmul, MatchesNaiveLoops) {
  const auto [ta, tb] = GetParam();
  const int64_t m = 5, n = 7, k = 3;
  const Tensor a = random_tensor(ta ? Shape{k, m} : Shape{m, k}, 1);
  const Tensor b = random_tensor(tb ? Shape{n, k} : Shape{k, n}, 2);
  const Tensor out = random_tensor({m, n}, 3);
  const std::vector<double> expected = naive_matmul(out, a, b, ta, tb, 0.5f, 2.0f);
  ops::matmul(out, a, b, ta, tb, 0.5f, 2.0f);
  test::expect_all_near(out, expected, 1e-5, "matmul");
}

INSTANTIATE_TEST_SUITE_P(Transposes, OpsMatmul,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool()));

// bf16 on oneDNN: the same product from the bf16 inputs, rounded once (tests/ops/bf16_reference.h).
// Odd sizes keep every dimension off oneDNN's blocking.
TEST_P(OpsMatmul, Bf16MatchesTheProductOfTheBf16Inputs) {
  const auto [ta, tb] = GetParam();
  const int64_t m = 33, n = 45, k = 29;
  const Tensor a = test::bf16_copy(random_tensor(ta ? Shape{k, m} : Shape{m, k}, 1));
  const Tensor b = test::bf16_copy(random_tensor(tb ? Shape{n, k} : Shape{k, n}, 2));
  const Tensor out = test::bf16_copy(random_tensor({m, n}, 3));
  std::vector<double> expected =
      test::reference_product(a.to_vector(), b.to_vector(), m, k, n, ta, tb);
  const std::vector<float> before = out.to_vector();
  for (size_t i = 0; i < expected.size(); ++i) expected[i] = 0.5 * expected[i] + 2.0 * before[i];
  ops::matmul(out, a, b, ta, tb, 0.5f, 2.0f);
  test::expect_bf16_near(out, expected, "bf16 matmul");
}

TEST(OpsMatmulEdges, EmptyInnerDimScalesByBeta) {
  const Tensor out = Tensor::from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2});
  ops::matmul(out, Tensor::empty({2, 0}), Tensor::empty({0, 2}), false, false, 1.0f, 3.0f);
  EXPECT_EQ(out.to_vector(), (std::vector<float>{3, 6, 9, 12}));
}

TEST(OpsMatmulEdges, Bf16EmptyInnerDimScalesByBeta) {
  const Tensor out = test::bf16_copy(Tensor::from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2}));
  ops::matmul(out, Tensor::empty({2, 0}, DType::bf16), Tensor::empty({0, 2}, DType::bf16), false,
              false, 1.0f, 3.0f);
  EXPECT_EQ(out.to_vector(), (std::vector<float>{3, 6, 9, 12}));
}

TEST(OpsMatmulEdges, EmptyOutputIsANoOp) {
  ops::matmul(Tensor::empty({0, 4}), Tensor::empty({0, 3}), random_tensor({3, 4}, 1), false, false,
              1.0f, 0.0f);
}

TEST(OpsMatmulValidation, InnerDimMismatchNamesTheExpectedShape) {
  testing::expect_error<InvalidArgument>(
      [] {
        ops::matmul(Tensor::empty({5, 7}), Tensor::empty({5, 3}), Tensor::empty({4, 7}), false,
                    false, 1.0f, 0.0f);
      },
      "matmul: b must be [K, N] = [3, 7], got f32[4, 7] on cpu");
}

}  // namespace
}  // namespace meshtrain
