// GELU (tanh approximation) against its formula in double; backward against finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "meshtrain/core/error.h"
#include "meshtrain/core/ops/cpu/fast_tanh.h"
#include "meshtrain/core/ops/ops.h"
#include "tests/ops/grad_check.h"
#include "tests/ops/test_tensors.h"
#include "tests/support/error_message.h"

namespace meshtrain {
namespace {

using test::random_tensor;

double gelu_reference(double x) {
  return 0.5 * x *
         (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
}

TEST(OpsGelu, ForwardMatchesFormula) {
  const std::vector<float> x = {-6.0f, -1.5f, -0.25f, 0.0f, 0.5f, 1.0f, 3.0f, 10.0f};
  const Tensor in = Tensor::from_vector(x, {2, 4});
  const Tensor out = Tensor::empty({2, 4});
  ops::gelu_forward(out, in);
  std::vector<double> want;
  for (float v : x) want.push_back(gelu_reference(v));
  test::expect_all_near(out, want, 1e-6, "gelu");
  // gelu(x) - gelu(-x) = x exactly in the formula; gelu(10) = 10 to f32 precision.
  const std::vector<float> y = out.to_vector();
  EXPECT_FLOAT_EQ(y[7], 10.0f);
  EXPECT_FLOAT_EQ(y[3], 0.0f);
}

// The vectorised tanh GELU uses, against tanh in double over a dense grid and the extremes.
TEST(OpsGelu, FastTanhIsWithin2e7OfTanhEverywhere) {
  double worst = 0.0;
  float worst_at = 0.0f;
  const auto check = [&](float u) {
    const double err = std::abs(static_cast<double>(ops::cpu::fast_tanh(u)) - std::tanh(double{u}));
    if (err > worst) worst = err, worst_at = u;
  };
  for (int i = 0; i <= 400000; ++i) check(-20.0f + 40.0f * static_cast<float>(i) / 400000.0f);
  for (const float u : {0.0f, -0.0f, 1e-30f, 1e-8f, 1e-4f, 88.0f, -88.0f, 1e30f, -1e30f})
    check(u);
  EXPECT_LT(worst, 2e-7) << "at u = " << worst_at;
  EXPECT_EQ(ops::cpu::fast_tanh(1e30f), 1.0f);
  EXPECT_EQ(ops::cpu::fast_tanh(-1e30f), -1.0f);
}

TEST(OpsGelu, OddPartIsIdentity) {
  const Tensor in = random_tensor({16}, 1, -3.0f, 3.0f);
  const Tensor neg = in.clone();
  ops::scale(neg, -1.0f);
  const Tensor out = Tensor::empty({16}), out_neg = Tensor::empty({16});
  ops::gelu_forward(out, in);
  ops::gelu_forward(out_neg, neg);
  const std::vector<float> x = in.to_vector(), a = out.to_vector(), b = out_neg.to_vector();
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(a[i] - b[i], x[i], 1e-6) << i;
}

TEST(OpsGelu, BackwardMatchesFiniteDifferences) {
  const Tensor in = random_tensor({3, 5}, 1, -3.0f, 3.0f);
  const Tensor d_out = random_tensor({3, 5}, 2);
  const Tensor out = Tensor::empty({3, 5});
  const auto loss = [&] {
    ops::gelu_forward(out, in);
    return test::weighted_sum(out, d_out);
  };
  const Tensor d_in = Tensor::empty({3, 5});
  ops::gelu_backward(d_in, d_out, in);
  test::expect_grad_near(d_in, test::numeric_grad(in, loss), "d_in");
}

TEST(OpsGeluValidation, SizesMustMatch) {
  testing::expect_error<InvalidArgument>(
      [] { ops::gelu_forward(Tensor::empty({4}), Tensor::empty({5})); },
      "gelu_forward: out must hold the elements of in = 5 elements, got f32[4] on cpu");
}

}  // namespace
}  // namespace meshtrain
