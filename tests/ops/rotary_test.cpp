// Rotary position embedding against a double-precision rotation at positions that start past 0;
// backward undoes forward and matches finite differences; bf16 within bf16 rounding; argument
// checks.
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

constexpr int64_t kB = 2, kT = 5, kHeads = 3, kHd = 8;
constexpr float kTheta = 10000.0f;
constexpr int64_t kFirst = 37;

// x [B, T, heads * hd] rotated in rotate-half form, in double. The angle is the f32 one that
// transformers computes (inv_freq = 1 / theta^(2i / hd) and p * inv_freq in f32), which the op
// promises; the rotation itself is exact.
std::vector<double> reference(const Tensor& x, int64_t head_dim, int64_t first_position) {
  const std::vector<float> v = x.to_vector();
  const int64_t seq = x.dim(1), width = x.dim(2), half = head_dim / 2;
  std::vector<double> out(v.begin(), v.end());
  for (int64_t r = 0; r < x.dim(0) * seq; ++r)
    for (int64_t head = 0; head < width / head_dim; ++head)
      for (int64_t i = 0; i < half; ++i) {
        const float inv_freq =
            1.0f / std::pow(kTheta, static_cast<float>(2 * i) / static_cast<float>(head_dim));
        const float angle = static_cast<float>(first_position + r % seq) * inv_freq;
        const double c = std::cos(static_cast<double>(angle));
        const double s = std::sin(static_cast<double>(angle));
        const int64_t i1 = r * width + head * head_dim + i, i2 = i1 + half;
        out[i1] = v[i1] * c - v[i2] * s;
        out[i2] = v[i2] * c + v[i1] * s;
      }
  return out;
}

TEST(OpsRotary, ForwardMatchesReferenceAtAnOffset) {
  const Tensor x = random_tensor({kB, kT, kHeads * kHd}, 1);
  const std::vector<double> want = reference(x, kHd, kFirst);
  ops::rotary_forward(x, kHd, kTheta, kFirst);
  test::expect_all_near(x, want, 1e-6, "x");
}

// Position 0 is the identity; its frequency-0 pair turns by one radian per position.
TEST(OpsRotary, PositionZeroIsIdentity) {
  const Tensor x = random_tensor({1, 2, kHd}, 2);
  const std::vector<float> before = x.to_vector();
  ops::rotary_forward(x, kHd, kTheta, 0);
  const std::vector<float> after = x.to_vector();
  for (int64_t i = 0; i < kHd; ++i) EXPECT_EQ(after[i], before[i]) << i;
  const double c = std::cos(1.0), s = std::sin(1.0);
  EXPECT_NEAR(after[kHd], before[kHd] * c - before[kHd + kHd / 2] * s, 1e-6);
}

TEST(OpsRotary, BackwardUndoesForward) {
  const Tensor x = random_tensor({kB, kT, kHeads * kHd}, 3);
  const Tensor original = x.clone();
  ops::rotary_forward(x, kHd, kTheta, kFirst);
  ops::rotary_backward(x, kHd, kTheta, kFirst);
  const std::vector<float> v = original.to_vector();
  test::expect_all_near(x, std::vector<double>(v.begin(), v.end()), 1e-6, "x");
}

// The rotation is linear, so its gradient is exact up to f32 rounding: backward on d_out is the
// gradient of sum(rotary(x) * d_out).
TEST(OpsRotary, BackwardMatchesFiniteDifferences) {
  const Tensor x = random_tensor({kB, kT, 2 * kHd}, 4);
  const Tensor d_out = random_tensor(x.shape(), 5);
  const Tensor rotated = Tensor::empty(x.shape());
  const auto loss = [&] {
    ops::cast(rotated, x);  // same-dtype copy
    ops::rotary_forward(rotated, kHd, kTheta, kFirst);
    return test::weighted_sum(rotated, d_out);
  };
  const Tensor d_x = d_out.clone();
  ops::rotary_backward(d_x, kHd, kTheta, kFirst);
  test::expect_grad_near(d_x, test::numeric_grad(x, loss), "d_x");
}

TEST(OpsRotary, Bf16WithinRoundingOfTheReference) {
  const Tensor x = test::bf16_copy(random_tensor({kB, kT, kHeads * kHd}, 6));
  const std::vector<double> want = reference(test::f32_copy(x), kHd, kFirst);
  ops::rotary_forward(x, kHd, kTheta, kFirst);
  test::expect_bf16_near(x, want, "x");
}

TEST(OpsRotaryValidation, ShapesAndArguments) {
  const Tensor x = Tensor::empty({kB, kT, kHeads * kHd});
  testing::expect_error<InvalidArgument>([&] { ops::rotary_forward(x, 5, kTheta, 0); },
                                         "rotary_forward: head_dim must be even and >= 2, got 5");
  testing::expect_error<InvalidArgument>(
      [&] { ops::rotary_forward(x, 16, kTheta, 0); },
      "rotary_forward: x must be [B, T, heads * head_dim] with a last dim divisible by head_dim "
      "= 16, got f32[2, 5, 24] on cpu");
  testing::expect_error<InvalidArgument>(
      [&] {
        ops::rotary_backward(Tensor::empty({kB * kT, kHeads * kHd}), kHd, kTheta, 0);
      },
      "rotary_backward: d_x must be [B, T, heads * head_dim] = [*, *, *], got f32[10, 24] on cpu");
  testing::expect_error<InvalidArgument>([&] { ops::rotary_forward(x, kHd, 0.0f, 0); },
                                         "rotary_forward: theta must be finite and > 0, got 0");
  testing::expect_error<InvalidArgument>([&] { ops::rotary_forward(x, kHd, kTheta, -1); },
                                         "rotary_forward: first_position must be >= 0, got -1");
  testing::expect_error<InvalidArgument>(
      [&] {
        ops::rotary_forward(Tensor::empty({kB, kT, kHd}, DType::i32), kHd, kTheta, 0);
      },
      "rotary_forward: x must be f32 or bf16, got i32[2, 5, 8] on cpu");
}

}  // namespace
}  // namespace meshtrain
