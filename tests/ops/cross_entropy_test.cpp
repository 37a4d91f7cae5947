// Cross-entropy against closed forms (including logits that overflow a naive exp) and a double
// reference; backward against softmax - onehot and against finite differences.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "core/ops/ops.h"
#include "tests/ops/expect_error.h"
#include "tests/ops/grad_check.h"
#include "tests/ops/test_tensors.h"

namespace meshtrain {
namespace {

using test::random_tensor;

TEST(OpsCrossEntropy, ClosedFormsAndLargeLogits) {
  const Tensor logits = Tensor::from_vector(
      std::vector<float>{0, 0, 0, 0, 1000, 1001, 999, -1e30f, 1000, 1001, 999, -1e30f}, {3, 4});
  const Tensor targets = Tensor::from_vector(std::vector<int32_t>{2, 1, 0}, {3});
  const Tensor losses = Tensor::empty({3});
  ops::cross_entropy_forward(losses, logits, targets);
  // Uniform logits: log V. Shifted by the max 1001: log(1 + e^-1 + e^-2) (+ 1 for target 0).
  const double tail = std::log(1.0 + std::exp(-1.0) + std::exp(-2.0));
  test::expect_all_near(losses, {std::log(4.0), tail, 1.0 + tail}, 1e-5, "losses");
}

// softmax(row) in double.
std::vector<double> softmax(const std::vector<float>& x, int64_t row, int64_t vocab) {
  double max = x[row * vocab];
  for (int64_t v = 0; v < vocab; ++v) max = std::max<double>(max, x[row * vocab + v]);
  std::vector<double> p(vocab);
  double sum = 0.0;
  for (int64_t v = 0; v < vocab; ++v) sum += p[v] = std::exp(x[row * vocab + v] - max);
  for (double& value : p) value /= sum;
  return p;
}

TEST(OpsCrossEntropy, ForwardAndBackwardMatchSoftmaxReference) {
  constexpr int64_t kN = 4, kV = 7;
  constexpr float kScale = 0.25f;
  const Tensor logits = random_tensor({kN, kV}, 1, -4.0f, 4.0f);
  const std::vector<int32_t> target_ids = {0, 6, 3, 3};
  const Tensor targets = Tensor::from_vector(target_ids, {kN});
  const Tensor losses = Tensor::empty({kN}), d_logits = Tensor::empty({kN, kV});
  ops::cross_entropy_forward(losses, logits, targets);
  ops::cross_entropy_backward(d_logits, logits, targets, kScale);

  const std::vector<float> x = logits.to_vector();
  std::vector<double> want_loss, want_grad;
  for (int64_t n = 0; n < kN; ++n) {
    const std::vector<double> p = softmax(x, n, kV);
    want_loss.push_back(-std::log(p[target_ids[n]]));
    for (int64_t v = 0; v < kV; ++v) want_grad.push_back(kScale * (p[v] - (v == target_ids[n])));
  }
  test::expect_all_near(losses, want_loss, 1e-5, "losses");
  test::expect_all_near(d_logits, want_grad, 1e-6, "d_logits");
}

TEST(OpsCrossEntropy, BackwardMatchesFiniteDifferencesOfTheScaledSum) {
  constexpr int64_t kN = 3, kV = 5;
  constexpr float kScale = 1.0f / kN;  // the mean over the batch's tokens
  const Tensor logits = random_tensor({kN, kV}, 2);
  const Tensor targets = Tensor::from_vector(std::vector<int32_t>{4, 0, 2}, {kN});
  const Tensor losses = Tensor::empty({kN});
  const Tensor weights = Tensor::from_vector(std::vector<float>(kN, kScale), {kN});
  const auto loss = [&] {
    ops::cross_entropy_forward(losses, logits, targets);
    return test::weighted_sum(losses, weights);
  };
  const Tensor d_logits = Tensor::empty({kN, kV});
  ops::cross_entropy_backward(d_logits, logits, targets, kScale);
  test::expect_grad_near(d_logits, test::numeric_grad(logits, loss), "d_logits");
}

TEST(OpsCrossEntropyValidation, TargetsAndLosses) {
  const Tensor logits = Tensor::zeros({2, 3});
  test::expect_error<InvalidArgument>(
      [&] {
        ops::cross_entropy_forward(Tensor::empty({2}), logits,
                                   Tensor::from_vector(std::vector<int32_t>{0, 3}, {2}));
      },
      "cross_entropy_forward: targets[1] = 3 is outside the vocabulary [0, 3)");
  test::expect_error<InvalidArgument>(
      [&] {
        ops::cross_entropy_forward(Tensor::empty({2}), logits, Tensor::empty({3}, DType::i32));
      },
      "cross_entropy_forward: targets must hold one id per row of logits, N = 2 elements, got "
      "i32[3] on cpu");
  test::expect_error<InvalidArgument>(
      [&] {
        ops::cross_entropy_forward(Tensor::empty({2}, DType::bf16), logits,
                                   Tensor::empty({2}, DType::i32));
      },
      "cross_entropy_forward: losses must be f32, got bf16[2] on cpu");
}

}  // namespace
}  // namespace meshtrain
