// Causal attention forward against explicit loops; backward against finite differences.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "core/ops/ops.h"
#include "tests/ops/grad_check.h"
#include "tests/ops/test_tensors.h"
#include "tests/support/error_message.h"

namespace meshtrain {
namespace {

using test::random_tensor;

constexpr int64_t kB = 2, kT = 5, kC = 6;
constexpr int kHeads = 2;
constexpr int64_t kHs = kC / kHeads;

struct Reference {
  std::vector<double> out, probs;
};

// softmax_j<=t(q_t . k_j / sqrt(hs)) and the probability-weighted sum of v, one query at a time.
Reference naive_attention(const Tensor& qkv) {
  const std::vector<float> x = qkv.to_vector();
  const auto at = [&](int64_t b, int64_t t, int64_t part, int64_t h, int64_t i) {
    return static_cast<double>(x[(b * kT + t) * 3 * kC + part * kC + h * kHs + i]);
  };
  Reference ref{std::vector<double>(kB * kT * kC), std::vector<double>(kB * kHeads * kT * kT, 0.0)};
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
        for (int64_t j = 0; j <= t; ++j)
          ref.probs[((b * kHeads + h) * kT + t) * kT + j] = w[j] / total;
        for (int64_t i = 0; i < kHs; ++i) {
          double sum = 0.0;
          for (int64_t j = 0; j <= t; ++j) sum += w[j] / total * at(b, j, 2, h, i);
          ref.out[(b * kT + t) * kC + h * kHs + i] = sum;
        }
      }
  return ref;
}

TEST(OpsAttention, ForwardMatchesNaiveLoops) {
  const Tensor qkv = random_tensor({kB, kT, 3 * kC}, 1, -2.0f, 2.0f);
  const Tensor out = Tensor::empty({kB, kT, kC});
  const Tensor probs = random_tensor({kB, kHeads, kT, kT}, 9);  // garbage the kernel must overwrite
  ops::attention_forward(out, probs, qkv, kHeads);
  const Reference ref = naive_attention(qkv);
  test::expect_all_near(out, ref.out, 1e-5, "out");
  test::expect_all_near(probs, ref.probs, 1e-6, "probs (zero above the diagonal)");
}

TEST(OpsAttention, FirstTokenAttendsOnlyToItself) {
  const Tensor qkv = random_tensor({1, kT, 3 * kC}, 2);
  const Tensor out = Tensor::empty({1, kT, kC}), probs = Tensor::empty({1, kHeads, kT, kT});
  ops::attention_forward(out, probs, qkv, kHeads);
  const std::vector<float> x = qkv.to_vector(), y = out.to_vector();
  for (int64_t c = 0; c < kC; ++c) EXPECT_FLOAT_EQ(y[c], x[2 * kC + c]);  // out[0] = v[0]
}

TEST(OpsAttention, BackwardMatchesFiniteDifferences) {
  const Tensor qkv = random_tensor({kB, kT, 3 * kC}, 1);
  const Tensor d_out = random_tensor({kB, kT, kC}, 2);
  const Tensor out = Tensor::empty({kB, kT, kC}), probs = Tensor::empty({kB, kHeads, kT, kT});
  const auto loss = [&] {
    ops::attention_forward(out, probs, qkv, kHeads);
    return test::weighted_sum(out, d_out);
  };
  loss();                                                   // fills probs for the backward pass
  const Tensor d_qkv = random_tensor({kB, kT, 3 * kC}, 3);  // overwritten, not accumulated
  ops::attention_backward(d_qkv, d_out, qkv, probs, kHeads);
  test::expect_grad_near(d_qkv, test::numeric_grad(qkv, loss), "d_qkv");
}

TEST(OpsAttentionValidation, HeadsAndShapes) {
  const Tensor qkv = Tensor::empty({kB, kT, 3 * kC});
  testing::expect_error<InvalidArgument>(
      [&] {
        ops::attention_forward(Tensor::empty({kB, kT, kC}), Tensor::empty({kB, 4, kT, kT}), qkv, 4);
      },
      "attention_forward: num_heads must divide C = 6, got num_heads = 4");
  testing::expect_error<InvalidArgument>(
      [&] {
        ops::attention_forward(Tensor::empty({kB, kT, kC}), Tensor::empty({kB, kHeads, kT, kT + 1}),
                               qkv, kHeads);
      },
      "attention_forward: probs must be [B, H, T, T] = [2, 2, 5, 5], got f32[2, 2, 5, 6] on cpu");
  testing::expect_error<InvalidArgument>(
      [&] {
        ops::attention_forward(Tensor::empty({kB, kT, kC}), Tensor::empty({kB, kHeads, kT, kT}),
                               Tensor::empty({kB, kT, 17}), kHeads);
      },
      "attention_forward: qkv must be [B, T, 3C] with a last dim divisible by 3, got f32[2, 5, "
      "17]");
}

}  // namespace
}  // namespace meshtrain
