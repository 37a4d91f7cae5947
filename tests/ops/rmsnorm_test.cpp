// RMSNorm forward against a double-precision reference; backward against finite differences and
// the reference's analytic gradient; bf16 storage within bf16 rounding; argument checks.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "meshtrain/core/error.h"
#include "meshtrain/core/ops/ops.h"
#include "tests/ops/bf16_reference.h"
#include "tests/ops/grad_check.h"
#include "tests/ops/test_tensors.h"
#include "tests/support/error_message.h"

namespace meshtrain {
namespace {

using test::random_tensor;

constexpr int64_t kRows = 3, kC = 8;
constexpr float kEps = 1e-5f;

// The reference in double: out, rstd, and for a given d_out the gradients d_in and d_weight.
struct RmsNormReference {
  std::vector<double> out, rstd, d_in, d_weight;
};
RmsNormReference reference(const Tensor& in, const Tensor& weight, const Tensor& d_out) {
  const std::vector<float> x = in.to_vector(), w = weight.to_vector(), dy = d_out.to_vector();
  const int64_t channels = weight.numel(), rows = in.numel() / channels;
  RmsNormReference ref;
  ref.d_weight.assign(static_cast<size_t>(channels), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const auto at = [&](const std::vector<float>& v, int64_t c) {
      return static_cast<double>(v[r * channels + c]);
    };
    double sq = 0.0;
    for (int64_t c = 0; c < channels; ++c) sq += at(x, c) * at(x, c);
    const double s = 1.0 / std::sqrt(sq / channels + kEps);
    // d_in = s * (g - xhat * mean(g * xhat)), g = d_out * weight, xhat = x * s.
    double g_xhat = 0.0;
    for (int64_t c = 0; c < channels; ++c) g_xhat += at(dy, c) * w[c] * at(x, c) * s;
    g_xhat /= channels;
    for (int64_t c = 0; c < channels; ++c) {
      ref.out.push_back(at(x, c) * s * w[c]);
      ref.d_in.push_back(s * (at(dy, c) * w[c] - at(x, c) * s * g_xhat));
      ref.d_weight[c] += at(dy, c) * at(x, c) * s;
    }
    ref.rstd.push_back(s);
  }
  return ref;
}

TEST(OpsRmsNorm, ForwardMatchesReferenceAndSavesRstd) {
  const Tensor in = random_tensor({1, kRows, kC}, 1, -2.0f, 3.0f);
  const Tensor weight = random_tensor({kC}, 2);
  const Tensor out = Tensor::empty({1, kRows, kC}), rstd = Tensor::empty({kRows});
  ops::rmsnorm_forward(out, rstd, in, weight, kEps);
  const RmsNormReference ref = reference(in, weight, Tensor::zeros({kRows, kC}));
  test::expect_all_near(out, ref.out, 1e-5, "out");
  test::expect_all_near(rstd, ref.rstd, 1e-5, "rstd");
}

TEST(OpsRmsNorm, BackwardMatchesFiniteDifferencesAndAccumulates) {
  const Tensor in = random_tensor({kRows, kC}, 1);
  const Tensor weight = random_tensor({kC}, 2), d_out = random_tensor({kRows, kC}, 3);
  const Tensor out = Tensor::empty({kRows, kC}), rstd = Tensor::empty({kRows});
  const auto loss = [&] {
    ops::rmsnorm_forward(out, rstd, in, weight, kEps);
    return test::weighted_sum(out, d_out);
  };
  loss();  // fills rstd for the backward pass

  // d_weight starts from nonzero values: the kernel must add onto them.
  const Tensor d_in = random_tensor({kRows, kC}, 4);  // overwritten
  const Tensor d_weight = Tensor::from_vector(std::vector<float>(kC, 10.0f), {kC});
  ops::rmsnorm_backward(d_in, d_weight, d_out, in, weight, rstd);
  ops::axpy(d_weight, -1.0f, Tensor::from_vector(std::vector<float>(kC, 10.0f), {kC}));

  test::expect_grad_near(d_in, test::numeric_grad(in, loss), "d_in");
  test::expect_grad_near(d_weight, test::numeric_grad(weight, loss), "d_weight");
  const RmsNormReference ref = reference(in, weight, d_out);
  test::expect_all_near(d_in, ref.d_in, 1e-5, "d_in against the analytic gradient");
  test::expect_all_near(d_weight, ref.d_weight, 1e-5, "d_weight against the analytic gradient");
}

// A frozen weight: no d_weight, the same d_in.
TEST(OpsRmsNorm, BackwardWithoutWeightGradientGivesTheSameInputGradient) {
  constexpr int64_t kManyRows = 200;  // several of the fixed row blocks d_weight sums over
  const Tensor in = random_tensor({kManyRows, kC}, 5), weight = random_tensor({kC}, 6);
  const Tensor d_out = random_tensor({kManyRows, kC}, 7);
  const Tensor out = Tensor::empty({kManyRows, kC}), rstd = Tensor::empty({kManyRows});
  ops::rmsnorm_forward(out, rstd, in, weight, kEps);
  const Tensor with = Tensor::empty({kManyRows, kC}), without = Tensor::empty({kManyRows, kC});
  ops::rmsnorm_backward(with, Tensor::zeros({kC}), d_out, in, weight, rstd);
  ops::rmsnorm_backward(without, Tensor(), d_out, in, weight, rstd);
  EXPECT_EQ(with.to_vector(), without.to_vector());
}

// bf16 in, weight, out and gradients; rstd f32. Each bf16 output is rounded once from f32 math on
// the bf16 inputs; d_weight starts at zero, so it too is one rounding of its sum.
TEST(OpsRmsNorm, Bf16WithinRoundingOfTheReference) {
  const Tensor in = test::bf16_copy(random_tensor({kRows, kC}, 8, -2.0f, 3.0f));
  const Tensor weight = test::bf16_copy(random_tensor({kC}, 9));
  const Tensor d_out = test::bf16_copy(random_tensor({kRows, kC}, 10));
  const RmsNormReference ref =
      reference(test::f32_copy(in), test::f32_copy(weight), test::f32_copy(d_out));
  const Tensor out = Tensor::empty({kRows, kC}, DType::bf16), rstd = Tensor::empty({kRows});
  ops::rmsnorm_forward(out, rstd, in, weight, kEps);
  test::expect_bf16_near(out, ref.out, "out");
  test::expect_all_near(rstd, ref.rstd, 1e-5, "rstd");
  const Tensor d_in = Tensor::empty({kRows, kC}, DType::bf16);
  const Tensor d_weight = Tensor::zeros({kC}, DType::bf16);
  ops::rmsnorm_backward(d_in, d_weight, d_out, in, weight, rstd);
  test::expect_bf16_near(d_in, ref.d_in, "d_in");
  test::expect_bf16_near(d_weight, ref.d_weight, "d_weight");
}

TEST(OpsRmsNormValidation, ShapesAndDtypes) {
  const Tensor in = Tensor::empty({kRows, kC}), weight = Tensor::empty({kC});
  const Tensor out = Tensor::empty({kRows, kC}), rstd = Tensor::empty({kRows});
  testing::expect_error<InvalidArgument>(
      [&] { ops::rmsnorm_forward(out, rstd, in, Tensor::empty({kC + 1}), kEps); },
      "rmsnorm_forward: in must be [N, C] = [..., 9], got f32[3, 8] on cpu");
  testing::expect_error<InvalidArgument>(
      [&] { ops::rmsnorm_forward(out, Tensor::empty({kRows + 1}), in, weight, kEps); },
      "rmsnorm_forward: rstd must hold one value per row, N = 3 elements, got f32[4] on cpu");
  testing::expect_error<InvalidArgument>(
      [&] { ops::rmsnorm_forward(out, Tensor::empty({kRows}, DType::bf16), in, weight, kEps); },
      "rmsnorm_forward: rstd must be f32, got bf16[3] on cpu");
  testing::expect_error<InvalidArgument>(
      [&] { ops::rmsnorm_forward(out, rstd, in, weight, -1.0f); },
      "rmsnorm_forward: eps must be >= 0, got -1");
  testing::expect_error<InvalidArgument>(
      [&] {
        ops::rmsnorm_backward(Tensor::empty({kRows, kC}), Tensor::empty({kC + 1}),
                              Tensor::empty({kRows, kC}), in, weight, rstd);
      },
      "rmsnorm_backward: d_weight must be [C] = [8], got f32[9] on cpu");
  testing::expect_error<InvalidArgument>(
      [&] {
        ops::rmsnorm_backward(Tensor::empty({kRows, kC}), Tensor(), Tensor::empty({kRows + 1, kC}),
                              in, weight, rstd);
      },
      "rmsnorm_backward: d_out must be [N, C] like in = [3, 8] after flattening, got "
      "f32[4, 8] on cpu");
}

}  // namespace
}  // namespace meshtrain
