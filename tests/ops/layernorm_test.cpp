// LayerNorm forward against a double-precision reference; backward against finite differences.
#include <gtest/gtest.h>

#include <cmath>

#include "meshtrain/core/error.h"
#include "meshtrain/core/ops/ops.h"
#include "tests/ops/grad_check.h"
#include "tests/ops/test_tensors.h"
#include "tests/support/error_message.h"

namespace meshtrain {
namespace {

using test::random_tensor;

constexpr int64_t kRows = 3, kC = 8;
constexpr float kEps = 1e-5f;

TEST(OpsLayerNorm, ForwardMatchesReferenceAndSavesStatistics) {
  const Tensor in = random_tensor({1, kRows, kC}, 1, -2.0f, 3.0f);
  const Tensor weight = random_tensor({kC}, 2), bias = random_tensor({kC}, 3);
  const Tensor out = Tensor::empty({1, kRows, kC});
  const Tensor mean = Tensor::empty({kRows}), rstd = Tensor::empty({kRows});
  ops::layernorm_forward(out, mean, rstd, in, weight, bias, kEps);

  const std::vector<float> x = in.to_vector(), w = weight.to_vector(), b = bias.to_vector();
  std::vector<double> want_out, want_mean, want_rstd;
  for (int64_t r = 0; r < kRows; ++r) {
    double m = 0.0, var = 0.0;
    for (int64_t c = 0; c < kC; ++c) m += x[r * kC + c];
    m /= kC;
    for (int64_t c = 0; c < kC; ++c) var += (x[r * kC + c] - m) * (x[r * kC + c] - m);
    const double s = 1.0 / std::sqrt(var / kC + kEps);
    for (int64_t c = 0; c < kC; ++c) want_out.push_back((x[r * kC + c] - m) * s * w[c] + b[c]);
    want_mean.push_back(m);
    want_rstd.push_back(s);
  }
  test::expect_all_near(out, want_out, 1e-5, "out");
  test::expect_all_near(mean, want_mean, 1e-6, "mean");
  test::expect_all_near(rstd, want_rstd, 1e-5, "rstd");
}

TEST(OpsLayerNorm, BackwardMatchesFiniteDifferencesAndAccumulates) {
  const Tensor in = random_tensor({kRows, kC}, 1);
  const Tensor weight = random_tensor({kC}, 2), bias = random_tensor({kC}, 3);
  const Tensor d_out = random_tensor({kRows, kC}, 4);
  const Tensor out = Tensor::empty({kRows, kC});
  const Tensor mean = Tensor::empty({kRows}), rstd = Tensor::empty({kRows});
  const auto loss = [&] {
    ops::layernorm_forward(out, mean, rstd, in, weight, bias, kEps);
    return test::weighted_sum(out, d_out);
  };
  loss();  // fills mean and rstd for the backward pass

  // Start the parameter gradients from nonzero values: the kernel must add onto them.
  const Tensor d_in = Tensor::empty({kRows, kC});
  const Tensor d_weight = Tensor::from_vector(std::vector<float>(kC, 10.0f), {kC});
  const Tensor d_bias = Tensor::from_vector(std::vector<float>(kC, -10.0f), {kC});
  ops::layernorm_backward(d_in, d_weight, d_bias, d_out, in, weight, mean, rstd);
  ops::axpy(d_weight, -1.0f, Tensor::from_vector(std::vector<float>(kC, 10.0f), {kC}));
  ops::axpy(d_bias, 1.0f, Tensor::from_vector(std::vector<float>(kC, 10.0f), {kC}));

  test::expect_grad_near(d_in, test::numeric_grad(in, loss), "d_in");
  test::expect_grad_near(d_weight, test::numeric_grad(weight, loss), "d_weight");
  test::expect_grad_near(d_bias, test::numeric_grad(bias, loss), "d_bias");
}

TEST(OpsLayerNormValidation, StatisticsMustBeF32PerRow) {
  const Tensor in = Tensor::empty({kRows, kC}), p = Tensor::empty({kC});
  testing::expect_error<InvalidArgument>(
      [&] {
        ops::layernorm_forward(Tensor::empty({kRows, kC}), Tensor::empty({kRows + 1}),
                               Tensor::empty({kRows}), in, p, p, kEps);
      },
      "layernorm_forward: mean must hold one value per row, N = 3 elements, got f32[4] on cpu");
  testing::expect_error<InvalidArgument>(
      [&] {
        ops::layernorm_forward(Tensor::empty({kRows, kC}), Tensor::empty({kRows}, DType::i32),
                               Tensor::empty({kRows}), in, p, p, kEps);
      },
      "layernorm_forward: mean must be f32, got i32[3] on cpu");
  testing::expect_error<InvalidArgument>(
      [&] {
        ops::layernorm_forward(Tensor::empty({kRows, kC}), Tensor::empty({kRows}),
                               Tensor::empty({kRows}), in, Tensor::empty({kC + 1}), p, kEps);
      },
      "layernorm_forward: bias must be [C] = [9], got f32[8] on cpu");
}

}  // namespace
}  // namespace meshtrain
