// Grouped-query causal attention against explicit loops in double for H = 4 query heads sharing
// 1, 2 or 4 key/value heads; backward against finite differences; with as many key/value heads as
// query heads, the same bits as the packed attention op on the same values; bf16 within bf16
// rounding; the same bits for any CPU thread count; argument checks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "meshtrain/core/error.h"
#include "meshtrain/core/ops/cpu/cpu_threads.h"
#include "meshtrain/core/ops/ops.h"
#include "tests/ops/bf16_reference.h"
#include "tests/ops/grad_check.h"
#include "tests/ops/test_tensors.h"
#include "tests/support/error_message.h"

namespace meshtrain {
namespace {

using test::random_tensor;

constexpr int64_t kB = 2, kT = 5, kHd = 3;
constexpr int kHeads = 4;
constexpr int kKvHeadCounts[] = {1, 2, 4};

struct Inputs {
  Tensor q, k, v;
};
Inputs random_inputs(int kv_heads, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  return {random_tensor({kB, kT, kHeads * kHd}, seed, lo, hi),
          random_tensor({kB, kT, kv_heads * kHd}, seed + 1, lo, hi),
          random_tensor({kB, kT, kv_heads * kHd}, seed + 2, lo, hi)};
}

// softmax_j<=t(q_t . k_j / sqrt(hd)) and the probability-weighted sum of v, one query at a time,
// query head h reading key/value head h / (H / KV).
std::vector<double> naive_attention(const Inputs& in, int kv_heads) {
  const std::vector<float> q = in.q.to_vector(), k = in.k.to_vector(), v = in.v.to_vector();
  const int64_t group = kHeads / kv_heads, q_width = kHeads * kHd, kv_width = kv_heads * kHd;
  std::vector<double> out(static_cast<size_t>(kB * kT * q_width));
  for (int64_t b = 0; b < kB; ++b)
    for (int64_t h = 0; h < kHeads; ++h) {
      const int64_t g = h / group;
      for (int64_t t = 0; t < kT; ++t) {
        std::vector<double> w(static_cast<size_t>(t + 1));
        double total = 0.0;
        for (int64_t j = 0; j <= t; ++j) {
          double dot = 0.0;
          for (int64_t i = 0; i < kHd; ++i)
            dot += static_cast<double>(q[(b * kT + t) * q_width + h * kHd + i]) *
                   k[(b * kT + j) * kv_width + g * kHd + i];
          w[j] = std::exp(dot / std::sqrt(static_cast<double>(kHd)));
          total += w[j];
        }
        for (int64_t i = 0; i < kHd; ++i) {
          double sum = 0.0;
          for (int64_t j = 0; j <= t; ++j)
            sum += w[j] / total * v[(b * kT + j) * kv_width + g * kHd + i];
          out[(b * kT + t) * q_width + h * kHd + i] = sum;
        }
      }
    }
  return out;
}

TEST(OpsGroupedAttention, ForwardMatchesNaiveLoops) {
  for (const int kv_heads : kKvHeadCounts) {
    SCOPED_TRACE("kv_heads = " + std::to_string(kv_heads));
    const Inputs in = random_inputs(kv_heads, 1, -2.0f, 2.0f);
    const Tensor out = random_tensor(in.q.shape(), 4);  // overwritten
    ops::grouped_attention_forward(out, in.q, in.k, in.v, kHeads, kv_heads);
    test::expect_all_near(out, naive_attention(in, kv_heads), 1e-5, "out");
  }
}

TEST(OpsGroupedAttention, BackwardMatchesFiniteDifferences) {
  for (const int kv_heads : kKvHeadCounts) {
    SCOPED_TRACE("kv_heads = " + std::to_string(kv_heads));
    const Inputs in = random_inputs(kv_heads, 5);
    const Tensor d_out = random_tensor(in.q.shape(), 8);
    const Tensor out = Tensor::empty(in.q.shape());
    const auto loss = [&] {
      ops::grouped_attention_forward(out, in.q, in.k, in.v, kHeads, kv_heads);
      return test::weighted_sum(out, d_out);
    };
    // Overwritten, not accumulated: they start from garbage.
    const Tensor d_q = random_tensor(in.q.shape(), 9), d_k = random_tensor(in.k.shape(), 10),
                 d_v = random_tensor(in.v.shape(), 11);
    ops::grouped_attention_backward(d_q, d_k, d_v, d_out, in.q, in.k, in.v, kHeads, kv_heads);
    test::expect_grad_near(d_q, test::numeric_grad(in.q, loss), "d_q");
    test::expect_grad_near(d_k, test::numeric_grad(in.k, loss), "d_k");
    test::expect_grad_near(d_v, test::numeric_grad(in.v, loss), "d_v");
  }
}

// q, k, v side by side in each row: the packed op's qkv [B, T, 3C].
Tensor pack(const Inputs& in) {
  const std::vector<float> q = in.q.to_vector(), k = in.k.to_vector(), v = in.v.to_vector();
  const int64_t c = in.q.dim(2);
  std::vector<float> qkv;
  for (int64_t row = 0; row < kB * kT; ++row)
    for (const std::vector<float>* part : {&q, &k, &v})
      qkv.insert(qkv.end(), part->begin() + row * c, part->begin() + (row + 1) * c);
  return Tensor::from_vector(qkv, {kB, kT, 3 * c});
}

// With KV == H the two ops run one implementation on differently strided views of the same
// values: the same bits, forward and backward, in f32 and bf16.
TEST(OpsGroupedAttention, EqualsThePackedOpWhenEveryQueryHeadHasItsOwnKeys) {
  for (const DType dtype : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const auto as = [&](const Tensor& t) { return dtype == DType::f32 ? t : test::bf16_copy(t); };
    const Inputs f32 = random_inputs(kHeads, 12, -2.0f, 2.0f);
    const Inputs in{as(f32.q), as(f32.k), as(f32.v)};
    const Tensor qkv = as(pack(f32));
    const Tensor d_out = as(random_tensor(in.q.shape(), 15));

    const Tensor grouped = Tensor::empty(in.q.shape(), dtype);
    const Tensor packed = Tensor::empty(in.q.shape(), dtype);
    ops::grouped_attention_forward(grouped, in.q, in.k, in.v, kHeads, kHeads);
    ops::attention_forward(packed, qkv, kHeads);
    EXPECT_EQ(grouped.to_vector(), packed.to_vector());

    const Tensor d_q = Tensor::empty(in.q.shape(), dtype), d_k = Tensor::empty(in.k.shape(), dtype),
                 d_v = Tensor::empty(in.v.shape(), dtype);
    const Tensor d_qkv = Tensor::empty(qkv.shape(), dtype);
    ops::grouped_attention_backward(d_q, d_k, d_v, d_out, in.q, in.k, in.v, kHeads, kHeads);
    ops::attention_backward(d_qkv, d_out, qkv, kHeads);
    EXPECT_EQ(pack({test::f32_copy(d_q), test::f32_copy(d_k), test::f32_copy(d_v)}).to_vector(),
              d_qkv.to_vector());
  }
}

// bf16 operands: forward within one bf16 rounding of the reference on the rounded inputs; the
// gradients within one rounding of the f32 kernel's on the same inputs (the bf16 path computes in
// f32 and rounds each gradient once, dK and dV after summing over the group).
TEST(OpsGroupedAttention, Bf16WithinRoundingOfF32) {
  constexpr int kKvHeads = 2;
  const Inputs f32 = random_inputs(kKvHeads, 16, -2.0f, 2.0f);
  const Inputs low{test::bf16_copy(f32.q), test::bf16_copy(f32.k), test::bf16_copy(f32.v)};
  const Inputs wide{test::f32_copy(low.q), test::f32_copy(low.k), test::f32_copy(low.v)};
  const Tensor out = Tensor::empty(low.q.shape(), DType::bf16);
  ops::grouped_attention_forward(out, low.q, low.k, low.v, kHeads, kKvHeads);
  test::expect_bf16_near(out, naive_attention(wide, kKvHeads), "out");

  const Tensor d_out = test::bf16_copy(random_tensor(low.q.shape(), 19));
  Tensor grads[2][3];
  for (const DType dtype : {DType::f32, DType::bf16}) {
    const Inputs& in = dtype == DType::f32 ? wide : low;
    const Tensor dy = dtype == DType::f32 ? test::f32_copy(d_out) : d_out;
    Tensor* g = grads[dtype == DType::bf16];
    g[0] = Tensor::empty(in.q.shape(), dtype);
    g[1] = Tensor::empty(in.k.shape(), dtype);
    g[2] = Tensor::empty(in.v.shape(), dtype);
    ops::grouped_attention_backward(g[0], g[1], g[2], dy, in.q, in.k, in.v, kHeads, kKvHeads);
  }
  const char* names[] = {"d_q", "d_k", "d_v"};
  for (int i = 0; i < 3; ++i) {
    const std::vector<float> want = grads[0][i].to_vector();
    test::expect_bf16_near(grads[1][i], std::vector<double>(want.begin(), want.end()), names[i]);
  }
}

// Backward splits (batch, key/value head) across threads and sums a group's query heads in order
// within one: the same bits for 1 and 3 threads.
TEST(OpsGroupedAttention, SameBitsForAnyThreadCount) {
  constexpr int kKvHeads = 2;
  const Inputs in = random_inputs(kKvHeads, 20);
  const Tensor d_out = random_tensor(in.q.shape(), 23);
  std::vector<float> results[2];
  const int saved = ops::cpu::cpu_threads();
  for (const int threads : {1, 3}) {
    ops::cpu::set_cpu_threads(threads);
    const Tensor out = Tensor::empty(in.q.shape()), d_q = Tensor::empty(in.q.shape()),
                 d_k = Tensor::empty(in.k.shape()), d_v = Tensor::empty(in.v.shape());
    ops::grouped_attention_forward(out, in.q, in.k, in.v, kHeads, kKvHeads);
    ops::grouped_attention_backward(d_q, d_k, d_v, d_out, in.q, in.k, in.v, kHeads, kKvHeads);
    std::vector<float>& all = results[threads == 3];
    for (const Tensor& t : {out, d_q, d_k, d_v}) {
      const std::vector<float> values = t.to_vector();
      all.insert(all.end(), values.begin(), values.end());
    }
  }
  ops::cpu::set_cpu_threads(saved);
  EXPECT_EQ(results[0], results[1]);
}

TEST(OpsGroupedAttentionValidation, HeadsAndShapes) {
  const Tensor q = Tensor::empty({kB, kT, kHeads * kHd}), kv = Tensor::empty({kB, kT, 2 * kHd});
  const Tensor out = Tensor::empty(q.shape());
  testing::expect_error<InvalidArgument>(
      [&] { ops::grouped_attention_forward(out, q, kv, kv, kHeads, 3); },
      "grouped_attention_forward: num_kv_heads must divide num_heads = 4, got num_kv_heads = 3");
  testing::expect_error<InvalidArgument>(
      [&] { ops::grouped_attention_forward(out, q, kv, kv, 5, 1); },
      "grouped_attention_forward: num_heads must divide q's last dim H * hd = 12, got "
      "num_heads = 5");
  testing::expect_error<InvalidArgument>(
      [&] {
        ops::grouped_attention_forward(out, q, Tensor::empty({kB, kT, 2 * kHd + 1}), kv, kHeads, 2);
      },
      "grouped_attention_forward: k must be [B, T, KV * hd] = [2, 5, 6], got f32[2, 5, 7] on cpu");
  testing::expect_error<InvalidArgument>(
      [&] {
        ops::grouped_attention_forward(Tensor::empty({kB, kT, 2 * kHd}), q, kv, kv, kHeads, 2);
      },
      "grouped_attention_forward: out must be [B, T, H * hd] like q = [2, 5, 12], got "
      "f32[2, 5, 6] on cpu");
  testing::expect_error<InvalidArgument>(
      [&] {
        ops::grouped_attention_backward(Tensor::empty(q.shape()), Tensor::empty(kv.shape()),
                                        Tensor::empty(q.shape()), Tensor::empty(q.shape()), q, kv,
                                        kv, kHeads, 2);
      },
      "grouped_attention_backward: d_v must be [B, T, KV * hd] like v = [2, 5, 6], got "
      "f32[2, 5, 12] on cpu");
  testing::expect_error<InvalidArgument>(
      [&] {
        ops::grouped_attention_forward(out, q, kv, Tensor::empty(kv.shape(), DType::bf16), kHeads,
                                       2);
      },
      "grouped_attention_forward: v must have the dtype of q (f32), got bf16[2, 5, 6] on cpu");
}

}  // namespace
}  // namespace meshtrain
