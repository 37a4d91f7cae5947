// Central finite differences, to check a backward kernel against its own forward kernel.
//
// The scalar under test is L = sum(out * w) for a fixed random w, so that dL/d(out) = w is the
// d_out handed to the backward kernel and dL/dx is what the backward kernel must return.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "meshtrain/core/tensor.h"

namespace meshtrain::test {

// Forwards run in f32, so L carries a rounding error near 1e-7 * sum|out * w|. With step h that
// error is amplified by 1 / (2h) while the truncation error of the central difference shrinks as
// h^2; h = 1e-2 on O(1) inputs balances the two at about 1e-4 for the small shapes of these tests.
inline constexpr float kFiniteDifferenceStep = 1e-2f;
// A 10x margin over that estimate, plus 1% relative for large gradients (whose L is larger too).
inline constexpr double kGradAbsTol = 1e-3;
inline constexpr double kGradRelTol = 1e-2;

// sum_i t[i] * w[i], accumulated in double.
inline double weighted_sum(const Tensor& t, const Tensor& w) {
  const std::vector<float> a = t.to_vector(), b = w.to_vector();
  double sum = 0.0;
  for (size_t i = 0; i < a.size(); ++i) sum += static_cast<double>(a[i]) * b[i];
  return sum;
}

// dL/dx[i] ~ (L(x + h e_i) - L(x - h e_i)) / 2h for every element of the f32 host tensor x, which
// loss() must read; each element is restored after its two evaluations.
inline std::vector<double> numeric_grad(const Tensor& x, const std::function<double()>& loss,
                                        float h = kFiniteDifferenceStep) {
  float* data = x.data<float>();
  std::vector<double> grad(static_cast<size_t>(x.numel()));
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float saved = data[i];
    data[i] = saved + h;
    const double plus = loss();
    data[i] = saved - h;
    const double minus = loss();
    data[i] = saved;
    // Divide by the step actually taken: saved +- h is rounded to f32.
    grad[i] = (plus - minus) / (static_cast<double>(saved + h) - static_cast<double>(saved - h));
  }
  return grad;
}

// |analytic - numeric| <= atol + rtol * |numeric| for every element.
inline void expect_grad_near(const Tensor& analytic, const std::vector<double>& numeric,
                             const std::string& what, double atol = kGradAbsTol,
                             double rtol = kGradRelTol) {
  const std::vector<float> got = analytic.to_vector();
  ASSERT_EQ(got.size(), numeric.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], numeric[i], atol + rtol * std::abs(numeric[i]))
        << what << " at element " << i;
}

}  // namespace meshtrain::test
