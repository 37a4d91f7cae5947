// AdamW against its two-step closed form (PyTorch semantics: decoupled decay, bias correction).
#include <gtest/gtest.h>

#include <cmath>

#include "meshtrain/core/error.h"
#include "meshtrain/core/ops/ops.h"
#include "tests/ops/test_tensors.h"
#include "tests/support/error_message.h"

namespace meshtrain {
namespace {

Tensor vec(const std::vector<float>& values) {
  return Tensor::from_vector(values, {static_cast<int64_t>(values.size())});
}

TEST(OpsAdamW, TwoStepsMatchClosedForm) {
  ops::AdamWHyper hyper;
  hyper.lr = 0.1f;
  hyper.beta1 = 0.9f;
  hyper.beta2 = 0.99f;
  hyper.eps = 1e-3f;
  hyper.weight_decay = 0.5f;
  const std::vector<float> p0 = {1.0f, -2.0f, 0.5f, 3.0f};
  const std::vector<float> g1 = {0.5f, -1.0f, 0.0f, 2.0f}, g2 = {-0.25f, -1.0f, 4.0f, 2.0f};
  const Tensor param = vec(p0), exp_avg = Tensor::zeros({4}), exp_avg_sq = Tensor::zeros({4});
  ops::adamw_step(param, vec(g1), exp_avg, exp_avg_sq, hyper, 1);
  ops::adamw_step(param, vec(g2), exp_avg, exp_avg_sq, hyper, 2);

  // The reference takes the hyper-parameters as the f32 values the kernel sees (1 - 0.99f is
  // 1e-6 away from 0.01 in relative terms, more than the tolerance below).
  const double lr = hyper.lr, b1 = hyper.beta1, b2 = hyper.beta2, eps = hyper.eps;
  const double decay = 1.0 - lr * hyper.weight_decay;
  std::vector<double> want_p, want_m, want_v;
  for (size_t i = 0; i < p0.size(); ++i) {
    // Step 1: the bias-corrected moments are g1 and g1^2 themselves.
    const double p1 = p0[i] * decay - lr * g1[i] / (std::abs(g1[i]) + eps);
    // Step 2: m2 = b1 (1 - b1) g1 + (1 - b1) g2, v2 likewise, corrected by 1 - b^2.
    const double m2 = b1 * (1 - b1) * g1[i] + (1 - b1) * g2[i];
    const double v2 = b2 * (1 - b2) * g1[i] * g1[i] + (1 - b2) * g2[i] * g2[i];
    want_p.push_back(p1 * decay -
                     lr * (m2 / (1 - b1 * b1)) / (std::sqrt(v2 / (1 - b2 * b2)) + eps));
    want_m.push_back(m2);
    want_v.push_back(v2);
  }
  test::expect_all_near(param, want_p, 1e-6, "param");
  test::expect_all_near(exp_avg, want_m, 1e-7, "exp_avg");
  test::expect_all_near(exp_avg_sq, want_v, 1e-7, "exp_avg_sq");
}

TEST(OpsAdamW, FirstStepMovesByLrTimesSignAndZeroGradOnlyDecays) {
  ops::AdamWHyper hyper;  // eps = 1e-8: the first step is lr * sign(g) to f32 precision
  hyper.lr = 0.01f;
  hyper.weight_decay = 0.1f;
  const Tensor param = vec({1.0f, 1.0f, 1.0f}), grad = vec({3.0f, -1e-3f, 0.0f});
  ops::adamw_step(param, grad, Tensor::zeros({3}), Tensor::zeros({3}), hyper, 1);
  const float decayed = 1.0f * (1.0f - 0.01f * 0.1f);
  test::expect_all_near(param, {decayed - 0.01f, decayed + 0.01f, decayed}, 1e-6, "param");
}

TEST(OpsAdamWValidation, StepSizesAndDtypes) {
  const Tensor p = Tensor::zeros({3});
  testing::expect_error<InvalidArgument>(
      [&] { ops::adamw_step(p, p.clone(), p.clone(), p.clone(), {}, 0); },
      "adamw_step: step counts from 1");
  testing::expect_error<InvalidArgument>(
      [&] { ops::adamw_step(p, Tensor::zeros({2}), p.clone(), p.clone(), {}, 1); },
      "adamw_step: grad must hold the elements of param = 3 elements, got f32[2] on cpu");
  testing::expect_error<InvalidArgument>(
      [&] { ops::adamw_step(p, Tensor::zeros({3}, DType::bf16), p.clone(), p.clone(), {}, 1); },
      "adamw_step: grad must be f32, got bf16[3] on cpu");
  ops::AdamWHyper bad;
  bad.beta2 = 1.0f;
  testing::expect_error<InvalidArgument>(
      [&] { ops::adamw_step(p, p.clone(), p.clone(), p.clone(), bad, 1); },
      "adamw_step: beta2 must be in [0, 1), got 1");
}

}  // namespace
}  // namespace meshtrain
