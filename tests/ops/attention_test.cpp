// Causal attention forward against explicit loops; backward (which recomputes the softmax) against
// finite differences and against itself: it keeps nothing between calls.
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

constexpr int64_t kB = 2, kT = 5, kC = 6;
constexpr int kHeads = 2;
constexpr int64_t kHs = kC / kHeads;

// softmax_j<=t(q_t . k_j / sqrt(hs)) and the probability-weighted sum of v, one query at a time.
std::vector<double> naive_attention(const Tensor& qkv) {
  const std::vector<float> x = qkv.to_vector();
  const auto at = [&](int64_t b, int64_t t, int64_t part, int64_t h, int64_t i) {
    return static_cast<double>(x[(b * kT + t) * 3 * kC + part * kC + h * kHs + i]);
  };
  std::vector<double> ref(kB * kT * kC);
  for (int64_t b = 0; b < kB; ++b)
    for (int64_t h = 0; h < kHeads; ++h)
      for (int64_t t = 0; t < kT; ++t) {
        std::vector<double> w(t + 1);
        double total = 0.0;
        for (int64_t j = 0; j <= t; ++j) {
          double dot = 0.0;
          for (int64_t i = 0; i < kHs; ++i) dot += at(b, t, 0, h, i) * at(b, j, 1, h, i);
          w[j] = std::exp(dot / std::sqrt(static_cast<double>(kHs)));
          total += w[j];
        }
        for (int64_t i = 0; i < kHs; ++i) {
          double sum = 0.0;
          for (int64_t j = 0; j <= t; ++j) sum += w[j] / total * at(b, j, 2, h, i);
          ref[(b * kT + t) * kC + h * kHs + i] = sum;
        }
      }
  return ref;
}

TEST(OpsAttention, ForwardMatchesNaiveLoops) {
  const Tensor qkv = random_tensor({kB, kT, 3 * kC}, 1, -2.0f, 2.0f);
  const Tensor out = Tensor::empty({kB, kT, kC});
  ops::attention_forward(out, qkv, kHeads);
  test::expect_all_near(out, naive_attention(qkv), 1e-5, "out");
}

TEST(OpsAttention, FirstTokenAttendsOnlyToItself) {
  const Tensor qkv = random_tensor({1, kT, 3 * kC}, 2);
  const Tensor out = Tensor::empty({1, kT, kC});
  ops::attention_forward(out, qkv, kHeads);
  const std::vector<float> x = qkv.to_vector(), y = out.to_vector();
  for (int64_t c = 0; c < kC; ++c) EXPECT_FLOAT_EQ(y[c], x[2 * kC + c]);  // out[0] = v[0]
}

TEST(OpsAttention, BackwardMatchesFiniteDifferences) {
  const Tensor qkv = random_tensor({kB, kT, 3 * kC}, 1);
  const Tensor d_out = random_tensor({kB, kT, kC}, 2);
  const Tensor out = Tensor::empty({kB, kT, kC});
  const auto loss = [&] {
    ops::attention_forward(out, qkv, kHeads);
    return test::weighted_sum(out, d_out);
  };
  const Tensor d_qkv = random_tensor({kB, kT, 3 * kC}, 3);  // overwritten, not accumulated
  ops::attention_backward(d_qkv, d_out, qkv, kHeads);
  test::expect_grad_near(d_qkv, test::numeric_grad(qkv, loss), "d_qkv");
}

// Backward needs no forward before it and gives the same bits whatever ran in between.
TEST(OpsAttention, BackwardDependsOnlyOnItsArguments) {
  const Tensor qkv = random_tensor({kB, kT, 3 * kC}, 4);
  const Tensor d_out = random_tensor({kB, kT, kC}, 5);
  const Tensor first = Tensor::empty(qkv.shape()), second = Tensor::empty(qkv.shape());
  ops::attention_backward(first, d_out, qkv, kHeads);
  const Tensor other = random_tensor({kB, 2 * kT, 3 * kC}, 6);
  ops::attention_forward(Tensor::empty({kB, 2 * kT, kC}), other, kHeads);  // other scratch use
  ops::attention_backward(second, d_out, qkv, kHeads);
  EXPECT_EQ(first.to_vector(), second.to_vector());
}

TEST(OpsAttentionValidation, HeadsAndShapes) {
  const Tensor qkv = Tensor::empty({kB, kT, 3 * kC});
  testing::expect_error<InvalidArgument>(
      [&] {
        ops::attention_forward(Tensor::empty({kB, kT, kC}), qkv, 4);
      },
      "attention_forward: num_heads must divide C = 6, got num_heads = 4");
  testing::expect_error<InvalidArgument>(
      [&] { ops::attention_forward(Tensor::empty({kB, kT, kC + 1}), qkv, kHeads); },
      "attention_forward: out must be [B, T, C] = [2, 5, 6], got f32[2, 5, 7] on cpu");
  testing::expect_error<InvalidArgument>(
      [&] {
        ops::attention_forward(Tensor::empty({kB, kT, kC}), Tensor::empty({kB, kT, 17}), kHeads);
      },
      "attention_forward: qkv must be [B, T, 3C] with a last dim divisible by 3, got f32[2, 5, "
      "17]");
}

}  // namespace
}  // namespace meshtrain
