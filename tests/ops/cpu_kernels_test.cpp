// The vectorised, threaded CPU kernels against straightforward double-precision loops, at sizes
// that leave every kind of vector tail (0, 1, 7, 16, 33, 1000 elements per row or tensor); their
// bf16 variants against the f32 kernel run on the bf16-rounded inputs; and bitwise the same results
// with 1, 2 and 3 CPU threads.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include "meshtrain/core/bf16.h"
#include "meshtrain/core/error.h"
#include "meshtrain/core/ops/cpu/cpu_threads.h"
#include "meshtrain/core/ops/cpu/fast_exp.h"
#include "meshtrain/core/ops/ops.h"
#include "tests/ops/test_tensors.h"

namespace meshtrain {
namespace {

using test::random_tensor;

const std::vector<int64_t> kSizes = {0, 1, 7, 16, 33, 1000};

// Sets the calling thread's CPU threads for a scope.
class CpuThreads {
 public:
  explicit CpuThreads(int threads) : saved_(ops::cpu::cpu_threads()) {
    ops::cpu::set_cpu_threads(threads);
  }
  ~CpuThreads() { ops::cpu::set_cpu_threads(saved_); }

 private:
  int saved_;
};

std::vector<double> doubles(const Tensor& t) {
  const std::vector<float> v = t.to_vector();
  return {v.begin(), v.end()};
}

// The bf16 copy of an f32 tensor, and that copy widened back to f32.
Tensor to_bf16(const Tensor& t) {
  const Tensor out = Tensor::empty(t.shape(), DType::bf16);
  ops::cast(out, t);
  return out;
}
Tensor to_f32(const Tensor& t) {
  const Tensor out = Tensor::empty(t.shape(), DType::f32);
  ops::cast(out, t);
  return out;
}

// A bf16 result against the f32 result on the same (bf16-rounded) inputs: within the rounding of
// the output to bf16 (half an ulp: 2^-8 relative, bf16 having 8 significant bits) and f32's own
// error, with `abs` for values that cancel to near zero.
void expect_bf16_rounding_of(const Tensor& bf16, const Tensor& f32, const std::string& what,
                             double abs = 1e-6) {
  ASSERT_EQ(bf16.dtype(), DType::bf16) << what;
  const std::vector<float> got = bf16.to_vector(), want = f32.to_vector();
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], std::abs(want[i]) * 0x1p-8 * 1.01 + abs) << what << " at " << i;
}

// Every tensor's bytes after `run` with 1 thread, then with 2 and 3: they must be the same. `run`
// overwrites or resets the tensors it checks.
void expect_same_for_any_thread_count(const std::function<std::vector<Tensor>()>& run,
                                      const std::string& what) {
  std::vector<std::vector<char>> first;
  for (const int threads : {1, 2, 3}) {
    CpuThreads scope(threads);
    const std::vector<Tensor> outputs = run();
    for (size_t i = 0; i < outputs.size(); ++i) {
      const auto* bytes = static_cast<const char*>(outputs[i].raw_data());
      std::vector<char> copy(bytes, bytes + outputs[i].nbytes());
      if (threads == 1) {
        first.push_back(std::move(copy));
      } else {
        EXPECT_TRUE(copy == first[i])
            << what << ": output " << i << " differs with " << threads << " threads";
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// fast_exp

TEST(CpuKernels, FastExpIsWithin2p5e7RelativeOfExpEverywhere) {
  double worst = 0.0;
  float worst_at = 0.0f;
  for (int i = 0; i <= 2000000; ++i) {
    const float x = -87.3f + 176.0f * static_cast<float>(i) / 2000000.0f;
    const double want = std::exp(double{x});
    const double err = std::abs(ops::cpu::fast_exp(x) - want) / want;
    if (err > worst) worst = err, worst_at = x;
  }
  EXPECT_LT(worst, 2.5e-7) << "at x = " << worst_at;
  EXPECT_EQ(ops::cpu::fast_exp(0.0f), 1.0f);
  EXPECT_EQ(ops::cpu::fast_exp(-100.0f), 0.0f);  // below 2^-126: flushed
  EXPECT_EQ(ops::cpu::fast_exp(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(ops::cpu::fast_exp(89.0f), std::numeric_limits<float>::infinity());
  EXPECT_EQ(ops::cpu::fast_exp(std::numeric_limits<float>::infinity()),
            std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(ops::cpu::fast_exp(std::numeric_limits<float>::quiet_NaN())));
  // Near the top of the range 2^n needs n = 128, built as 2^127 * 2.
  EXPECT_NEAR(ops::cpu::fast_exp(88.7f) / std::exp(double{88.7f}), 1.0, 2.5e-7);
}

// ---------------------------------------------------------------------------------------------
// Elementwise kernels, GELU and the casts at every tail size.

double gelu_ref(double x) {
  return 0.5 * x *
         (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
}
double gelu_grad_ref(double x) {
  const double k = std::sqrt(2.0 / std::numbers::pi);
  const double t = std::tanh(k * (x + 0.044715 * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3.0 * 0.044715 * x * x);
}

TEST(CpuKernels, ElementwiseAndGeluMatchScalarLoopsAtEveryTail) {
  for (const int64_t n : kSizes) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const Tensor a = random_tensor({n}, 1, -4.0f, 4.0f), b = random_tensor({n}, 2, -4.0f, 4.0f);
    const std::vector<float> x = a.to_vector(), y = b.to_vector();
    std::vector<double> sum(n), axpy(n), scaled(n), gelu(n), gelu_back(n);
    double squares = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      sum[i] = x[i] + y[i];  // in f32: the kernel rounds once, as this does
      axpy[i] = y[i] + static_cast<double>(0.375f * x[i]);
      scaled[i] = x[i] * -1.5f;
      gelu[i] = gelu_ref(x[i]);
      gelu_back[i] = y[i] * gelu_grad_ref(x[i]);
      squares += double{x[i]} * x[i];
    }
    const Tensor out = Tensor::empty({n});
    ops::add(out, a, b);
    test::expect_all_near(out, sum, 0.0, "add");
    const Tensor yy = b.clone();
    ops::axpy(yy, 0.375f, a);
    test::expect_all_near(yy, axpy, 1e-6, "axpy");
    const Tensor xs = a.clone();
    ops::scale(xs, -1.5f);
    test::expect_all_near(xs, scaled, 0.0, "scale");
    EXPECT_NEAR(ops::sum_squares({a}), squares, 1e-12 * squares);
    ops::gelu_forward(out, a);
    test::expect_all_near(out, gelu, 2e-6, "gelu_forward");
    ops::gelu_backward(out, b, a);
    test::expect_all_near(out, gelu_back, 4e-6, "gelu_backward");
  }
}

TEST(CpuKernels, CastsMatchScalarRoundingAtEveryTail) {
  // The hard cases of round-to-nearest-even (ties both ways, carries into the exponent, overflow
  // to inf, NaN, subnormals), repeated so that they land in every vector lane and in the tail.
  const std::vector<uint32_t> cases = {0x3f800000, 0x3f807fff, 0x3f808000, 0x3f808001,
                                       0x3f818000, 0xbf818000, 0x3fff8000, 0x00008000,
                                       0x00018000, 0x80008001, 0x7f7fffff, 0x7f7f8000,
                                       0xff800000, 0x7fc00000, 0x7f800001, 0xff800001};
  for (const int64_t n : kSizes) {
    SCOPED_TRACE("n = " + std::to_string(n));
    std::vector<float> values(n);
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t bits = cases[(i * 7) % cases.size()] + static_cast<uint32_t>(i / 97);
      std::memcpy(&values[i], &bits, 4);
    }
    const Tensor in = Tensor::from_vector(values, {n});
    const Tensor narrow = Tensor::empty({n}, DType::bf16);
    ops::cast(narrow, in);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(narrow.data<BF16>()[i].bits, meshtrain::to_bf16(values[i]).bits) << "at " << i;
    const Tensor wide = Tensor::empty({n});
    ops::cast(wide, narrow);
    for (int64_t i = 0; i < n; ++i) {
      uint32_t got;
      std::memcpy(&got, &wide.data<float>()[i], 4);
      ASSERT_EQ(got, static_cast<uint32_t>(narrow.data<BF16>()[i].bits) << 16) << "at " << i;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// LayerNorm

struct LayerNormRef {
  std::vector<double> out, mean, rstd, d_in, d_weight, d_bias;
};

LayerNormRef layernorm_ref(const Tensor& in, const Tensor& weight, const Tensor& bias,
                           const Tensor& d_out, float eps) {
  const int64_t c = weight.numel(), rows = c ? in.numel() / c : 0;
  const std::vector<float> x = in.to_vector(), w = weight.to_vector(), b = bias.to_vector(),
                           dy = d_out.to_vector();
  LayerNormRef r{std::vector<double>(x.size()), std::vector<double>(rows),
                 std::vector<double>(rows),     std::vector<double>(x.size()),
                 std::vector<double>(c, 0.0),   std::vector<double>(c, 0.0)};
  for (int64_t n = 0; n < rows; ++n) {
    const auto at = [&](int64_t i) { return static_cast<double>(x[n * c + i]); };
    double m = 0.0, var = 0.0;
    for (int64_t i = 0; i < c; ++i) m += at(i);
    m /= c;
    for (int64_t i = 0; i < c; ++i) var += (at(i) - m) * (at(i) - m);
    const double s = 1.0 / std::sqrt(var / c + eps);
    double g_mean = 0.0, gx_mean = 0.0;
    for (int64_t i = 0; i < c; ++i) {
      r.out[n * c + i] = (at(i) - m) * s * w[i] + b[i];
      g_mean += double{dy[n * c + i]} * w[i] / c;
      gx_mean += double{dy[n * c + i]} * w[i] * (at(i) - m) * s / c;
    }
    for (int64_t i = 0; i < c; ++i) {
      const double xhat = (at(i) - m) * s;
      r.d_in[n * c + i] = (double{dy[n * c + i]} * w[i] - g_mean - xhat * gx_mean) * s;
      r.d_weight[i] += dy[n * c + i] * xhat;
      r.d_bias[i] += dy[n * c + i];
    }
    r.mean[n] = m;
    r.rstd[n] = s;
  }
  return r;
}

TEST(CpuKernels, LayerNormMatchesScalarLoopsAtEveryTail) {
  constexpr int64_t kRows = 5;
  for (const int64_t c : kSizes) {
    if (c == 0) continue;  // C = 0 has no mean
    SCOPED_TRACE("C = " + std::to_string(c));
    const Tensor in = random_tensor({kRows, c}, 1, -2.0f, 3.0f), w = random_tensor({c}, 2),
                 b = random_tensor({c}, 3), dy = random_tensor({kRows, c}, 4);
    const Tensor out = Tensor::empty({kRows, c}), mean = Tensor::empty({kRows}),
                 rstd = Tensor::empty({kRows}), d_in = Tensor::empty({kRows, c});
    const Tensor dw = Tensor::zeros({c}), db = Tensor::zeros({c});
    ops::layernorm_forward(out, mean, rstd, in, w, b, 1e-5f);
    ops::layernorm_backward(d_in, dw, db, dy, in, w, mean, rstd);
    const LayerNormRef ref = layernorm_ref(in, w, b, dy, 1e-5f);
    test::expect_all_near(out, ref.out, 2e-5, "out");
    test::expect_all_near(mean, ref.mean, 1e-6, "mean");
    test::expect_all_near(rstd, ref.rstd, 2e-5 * (c == 1 ? 316 : 1), "rstd");  // c=1: 1/sqrt(eps)
    test::expect_all_near(d_in, ref.d_in, 2e-4 * (c == 1 ? 316 : 1), "d_in");
    test::expect_all_near(dw, ref.d_weight, 2e-5, "d_weight");
    test::expect_all_near(db, ref.d_bias, 2e-5, "d_bias");
  }
}

// ---------------------------------------------------------------------------------------------
// Cross-entropy

TEST(CpuKernels, CrossEntropyMatchesScalarLoopsAtEveryTail) {
  constexpr int64_t kRows = 4;
  constexpr float kScale = 0.25f;
  for (const int64_t v : kSizes) {
    if (v == 0) continue;  // a softmax needs an entry
    SCOPED_TRACE("V = " + std::to_string(v));
    const Tensor logits = random_tensor({kRows, v}, 1, -8.0f, 8.0f);
    std::vector<int32_t> ids(kRows);
    for (int64_t n = 0; n < kRows; ++n) ids[n] = static_cast<int32_t>((n * 5 + 3) % (v + 2));
    const Tensor targets = Tensor::from_vector(ids, {kRows});
    const Tensor row_max = Tensor::empty({kRows}), sum_exp = Tensor::empty({kRows}),
                 picked = Tensor::empty({kRows}), d_logits = Tensor::empty({kRows, v});
    ops::cross_entropy_row_max(row_max, logits);
    ops::cross_entropy_partials(sum_exp, picked, logits, targets, row_max, 0);
    ops::cross_entropy_backward(d_logits, logits, targets, row_max, sum_exp, 0, kScale);

    const std::vector<float> x = logits.to_vector();
    std::vector<double> want_max(kRows), want_sum(kRows), want_picked(kRows), want_grad(x.size());
    for (int64_t n = 0; n < kRows; ++n) {
      double m = -INFINITY, s = 0.0;
      for (int64_t i = 0; i < v; ++i) m = std::max(m, double{x[n * v + i]});
      for (int64_t i = 0; i < v; ++i) s += std::exp(x[n * v + i] - m);
      for (int64_t i = 0; i < v; ++i)
        want_grad[n * v + i] = kScale * (std::exp(x[n * v + i] - m) / s - (i == ids[n] ? 1 : 0));
      want_max[n] = m;
      want_sum[n] = s;
      want_picked[n] = ids[n] < v ? x[n * v + ids[n]] : 0.0;
    }
    test::expect_all_near(row_max, want_max, 0.0, "row_max");
    std::vector<double> sums = doubles(sum_exp);
    for (int64_t n = 0; n < kRows; ++n) EXPECT_NEAR(sums[n], want_sum[n], 1e-6 * want_sum[n]);
    test::expect_all_near(picked, want_picked, 0.0, "target_logit");
    test::expect_all_near(d_logits, want_grad, 2e-7, "d_logits");
  }
}

// ---------------------------------------------------------------------------------------------
// Attention: forward and backward against double loops, heads of every tail length.

struct AttentionRef {
  std::vector<double> out, d_qkv;
};

AttentionRef attention_ref(const Tensor& qkv_t, const Tensor& d_out_t, int heads) {
  const int64_t batch = qkv_t.dim(0), seq = qkv_t.dim(1), c = qkv_t.dim(2) / 3, hs = c / heads;
  const std::vector<float> x = qkv_t.to_vector(), dy = d_out_t.to_vector();
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  AttentionRef r{std::vector<double>(batch * seq * c, 0.0), std::vector<double>(x.size(), 0.0)};
  const auto qkv = [&](int64_t b, int64_t t, int part, int64_t h, int64_t i) -> double {
    return x[(b * seq + t) * 3 * c + part * c + h * hs + i];
  };
  const auto dqkv = [&](int64_t b, int64_t t, int part, int64_t h, int64_t i) -> double& {
    return r.d_qkv[(b * seq + t) * 3 * c + part * c + h * hs + i];
  };
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h) {
      std::vector<double> p(seq * seq, 0.0), ds(seq * seq, 0.0);
      for (int64_t t = 0; t < seq; ++t) {
        double m = -INFINITY, total = 0.0;
        std::vector<double> s(t + 1);
        for (int64_t j = 0; j <= t; ++j) {
          s[j] = 0.0;
          for (int64_t i = 0; i < hs; ++i) s[j] += qkv(b, t, 0, h, i) * qkv(b, j, 1, h, i);
          s[j] *= scale;
          m = std::max(m, s[j]);
        }
        for (int64_t j = 0; j <= t; ++j) total += std::exp(s[j] - m);
        for (int64_t j = 0; j <= t; ++j) p[t * seq + j] = std::exp(s[j] - m) / total;
        for (int64_t i = 0; i < hs; ++i) {
          double o = 0.0;
          for (int64_t j = 0; j <= t; ++j) o += p[t * seq + j] * qkv(b, j, 2, h, i);
          r.out[(b * seq + t) * c + h * hs + i] = o;
        }
        // dP = dO V^T, dS = P (dP - sum P dP).
        std::vector<double> dp(t + 1, 0.0);
        double dot = 0.0;
        for (int64_t j = 0; j <= t; ++j) {
          for (int64_t i = 0; i < hs; ++i)
            dp[j] += dy[(b * seq + t) * c + h * hs + i] * qkv(b, j, 2, h, i);
          dot += p[t * seq + j] * dp[j];
        }
        for (int64_t j = 0; j <= t; ++j) ds[t * seq + j] = p[t * seq + j] * (dp[j] - dot);
      }
      for (int64_t t = 0; t < seq; ++t)
        for (int64_t j = 0; j <= t; ++j)
          for (int64_t i = 0; i < hs; ++i) {
            dqkv(b, j, 2, h, i) += p[t * seq + j] * dy[(b * seq + t) * c + h * hs + i];
            dqkv(b, t, 0, h, i) += scale * ds[t * seq + j] * qkv(b, j, 1, h, i);
            dqkv(b, j, 1, h, i) += scale * ds[t * seq + j] * qkv(b, t, 0, h, i);
          }
    }
  return r;
}

TEST(CpuKernels, AttentionMatchesScalarLoopsAtEveryTail) {
  constexpr int kHeads = 2;
  for (const int64_t seq : {int64_t{1}, int64_t{7}, int64_t{16}, int64_t{33}}) {
    SCOPED_TRACE("T = " + std::to_string(seq));
    constexpr int64_t kBatch = 2, kC = 2 * 5;
    const Tensor qkv = random_tensor({kBatch, seq, 3 * kC}, 1, -2.0f, 2.0f);
    const Tensor d_out = random_tensor({kBatch, seq, kC}, 2);
    const Tensor out = Tensor::empty({kBatch, seq, kC}), d_qkv = Tensor::empty(qkv.shape());
    ops::attention_forward(out, qkv, kHeads);
    ops::attention_backward(d_qkv, d_out, qkv, kHeads);
    const AttentionRef ref = attention_ref(qkv, d_out, kHeads);
    test::expect_all_near(out, ref.out, 1e-5, "out");
    test::expect_all_near(d_qkv, ref.d_qkv, 2e-5, "d_qkv");
  }
}

// ---------------------------------------------------------------------------------------------
// Embedding and AdamW

TEST(CpuKernels, EmbeddingBackwardAddsRepeatedIdsInOrder) {
  // Ids repeat, and some fall outside the slice [2, 2 + V).
  constexpr int64_t kV = 5;
  for (const int64_t c : kSizes) {
    SCOPED_TRACE("C = " + std::to_string(c));
    const std::vector<int32_t> ids = {3, 2, 3, 9, 0, 6, 3, 2, 1, 4};
    const int64_t n = static_cast<int64_t>(ids.size());
    const Tensor d_out = random_tensor({n, c}, 1), d_table = random_tensor({kV, c}, 2);
    const std::vector<float> dy = d_out.to_vector();
    // Sequential f32 accumulation, position by position: the order the kernel must keep.
    std::vector<float> acc = d_table.to_vector();
    for (int64_t i = 0; i < n; ++i) {
      const int64_t row = ids[i] - 2;
      if (row < 0 || row >= kV) continue;
      for (int64_t k = 0; k < c; ++k) acc[row * c + k] += dy[i * c + k];
    }
    const std::vector<double> want(acc.begin(), acc.end());
    ops::embedding_backward(d_table, d_out, Tensor::from_vector(ids, {n}), 2);
    test::expect_all_near(d_table, want, 0.0, "d_table");
  }
}

TEST(CpuKernels, AdamWMatchesScalarLoopAtEveryTail) {
  ops::AdamWHyper hyper;
  hyper.weight_decay = 0.1f;
  for (const int64_t n : kSizes) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const Tensor p = random_tensor({n}, 1), g = random_tensor({n}, 2);
    const Tensor m = random_tensor({n}, 3, -0.1f, 0.1f), v = random_tensor({n}, 4, 0.0f, 0.01f);
    std::vector<double> want_p(n), want_m(n), want_v(n);
    const std::vector<float> p0 = p.to_vector(), g0 = g.to_vector(), m0 = m.to_vector(),
                             v0 = v.to_vector();
    const int64_t step = 3;
    // The hyper-parameters as the f32 values the kernel gets.
    const double b1 = hyper.beta1, b2 = hyper.beta2, lr = hyper.lr, wd = hyper.weight_decay;
    const double c1 = 1.0f - hyper.beta1, c2 = 1.0f - hyper.beta2;
    for (int64_t i = 0; i < n; ++i) {
      want_m[i] = b1 * m0[i] + c1 * g0[i];
      want_v[i] = b2 * v0[i] + c2 * g0[i] * g0[i];
      const double denom = std::sqrt(want_v[i] / (1 - std::pow(b2, step))) + double{hyper.eps};
      want_p[i] = p0[i] * (1 - lr * wd) - lr / (1 - std::pow(b1, step)) * want_m[i] / denom;
    }
    ops::adamw_step(p, g, m, v, hyper, step);
    test::expect_all_near(m, want_m, 1e-7, "exp_avg");
    test::expect_all_near(v, want_v, 1e-8, "exp_avg_sq");
    test::expect_all_near(p, want_p, 1e-5, "param");
  }
}

// ---------------------------------------------------------------------------------------------
// bf16 storage: the f32 kernel on the bf16-rounded inputs, rounded once.

TEST(CpuKernels, Bf16KernelsMatchF32OnRoundedInputs) {
  constexpr int64_t kRows = 6, kC = 33;
  const Tensor in = to_f32(to_bf16(random_tensor({kRows, kC}, 1, -3.0f, 3.0f)));
  const Tensor other = to_f32(to_bf16(random_tensor({kRows, kC}, 2, -3.0f, 3.0f)));
  const Tensor w = to_f32(to_bf16(random_tensor({kC}, 3))),
               b = to_f32(to_bf16(random_tensor({kC}, 4)));
  const auto both = [&](const std::string& what, const std::function<Tensor(DType)>& run,
                        double abs = 1e-6) {
    SCOPED_TRACE(what);
    const Tensor f32 = run(DType::f32), bf16 = run(DType::bf16);
    expect_bf16_rounding_of(bf16, f32, what, abs);
  };
  const auto as = [](const Tensor& t, DType dtype) { return dtype == DType::f32 ? t : to_bf16(t); };
  both("add", [&](DType t) {
    const Tensor out = Tensor::empty(in.shape(), t);
    ops::add(out, as(in, t), as(other, t));
    return out;
  });
  both("axpy", [&](DType t) {
    const Tensor y = as(other, t).clone();
    ops::axpy(y, 0.5f, as(in, t));
    return y;
  });
  both("scale", [&](DType t) {
    const Tensor x = as(in, t).clone();
    ops::scale(x, 0.3f);
    return x;
  });
  EXPECT_DOUBLE_EQ(ops::sum_squares({to_bf16(in)}), ops::sum_squares({in}));  // exact in both
  both("gelu_forward", [&](DType t) {
    const Tensor out = Tensor::empty(in.shape(), t);
    ops::gelu_forward(out, as(in, t));
    return out;
  });
  both("gelu_backward", [&](DType t) {
    const Tensor out = Tensor::empty(in.shape(), t);
    ops::gelu_backward(out, as(other, t), as(in, t));
    return out;
  });
  // LayerNorm: statistics stay f32 and equal; d_weight / d_bias start from zero, so they are
  // rounded once too.
  Tensor stats[2][2];
  const auto layernorm = [&](DType t, int output) {
    const Tensor out = Tensor::empty(in.shape(), t), d_in = Tensor::empty(in.shape(), t);
    const Tensor mean = Tensor::empty({kRows}), rstd = Tensor::empty({kRows});
    const Tensor dw = Tensor::zeros({kC}, t), db = Tensor::zeros({kC}, t);
    ops::layernorm_forward(out, mean, rstd, as(in, t), as(w, t), as(b, t), 1e-5f);
    ops::layernorm_backward(d_in, dw, db, as(other, t), as(in, t), as(w, t), mean, rstd);
    stats[t == DType::bf16][0] = mean;
    stats[t == DType::bf16][1] = rstd;
    return std::vector<Tensor>{out, d_in, dw, db}[output];
  };
  for (int output = 0; output < 4; ++output)
    both(
        "layernorm output " + std::to_string(output), [&](DType t) { return layernorm(t, output); },
        1e-5);
  EXPECT_EQ(stats[0][0].to_vector(), stats[1][0].to_vector());
  EXPECT_EQ(stats[0][1].to_vector(), stats[1][1].to_vector());
  // Cross-entropy: statistics f32 and equal; d_logits rounded once.
  const Tensor targets = Tensor::from_vector(std::vector<int32_t>{0, 5, 32, 40, 7, 1}, {kRows});
  std::vector<float> ce_stats[2];
  both("cross_entropy_backward", [&](DType t) {
    const Tensor max = Tensor::empty({kRows}), sum = Tensor::empty({kRows}),
                 picked = Tensor::empty({kRows}), d = Tensor::empty(in.shape(), t);
    ops::cross_entropy_row_max(max, as(in, t));
    ops::cross_entropy_partials(sum, picked, as(in, t), targets, max, 0);
    ops::cross_entropy_backward(d, as(in, t), targets, max, sum, 0, 0.5f);
    for (const Tensor& s : {max, sum, picked})
      for (float value : s.to_vector()) ce_stats[t == DType::bf16].push_back(value);
    return d;
  });
  EXPECT_EQ(ce_stats[0], ce_stats[1]);
  // Attention (qkv [2, 3, 3 * 11], 1 head) and embedding.
  const Tensor qkv = to_f32(to_bf16(random_tensor({2, 3, 33}, 5, -2.0f, 2.0f)));
  const Tensor dy = to_f32(to_bf16(random_tensor({2, 3, 11}, 6)));
  both("attention_forward", [&](DType t) {
    const Tensor out = Tensor::empty({2, 3, 11}, t);
    ops::attention_forward(out, as(qkv, t), 1);
    return out;
  });
  both("attention_backward", [&](DType t) {
    const Tensor d_qkv = Tensor::empty(qkv.shape(), t);
    ops::attention_backward(d_qkv, as(dy, t), as(qkv, t), 1);
    return d_qkv;
  });
  const Tensor ids = Tensor::from_vector(std::vector<int32_t>{1, 4, 1, 1, 0, 9}, {kRows});
  both("embedding_forward", [&](DType t) {
    const Tensor out = Tensor::empty(in.shape(), t);
    ops::embedding_forward(out, ids, as(in, t), 0);
    return out;
  });
  both("embedding_backward", [&](DType t) {
    const Tensor table = Tensor::zeros({5, kC}, t);
    ops::embedding_backward(table, as(in, t), ids, 0);
    return table;
  });
}

// ---------------------------------------------------------------------------------------------
// Thread counts: sizes large enough that every kernel splits its work.

TEST(CpuKernels, ResultsAreBitwiseTheSameForAnyThreadCount) {
  for (const DType dtype : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const auto as = [&](const Tensor& t) { return dtype == DType::f32 ? t.clone() : to_bf16(t); };
    constexpr int64_t kN = 100003, kRows = 777, kC = 129, kV = 1001;
    const Tensor a = as(random_tensor({kN}, 1, -4.0f, 4.0f)), b = as(random_tensor({kN}, 2));
    expect_same_for_any_thread_count(
        [&] {
          const Tensor sum = Tensor::empty({kN}, dtype), y = b.clone(), x = a.clone();
          const Tensor g = Tensor::empty({kN}, dtype), dg = Tensor::empty({kN}, dtype);
          ops::add(sum, a, b);
          ops::axpy(y, 0.7f, a);
          ops::scale(x, 1.3f);
          ops::gelu_forward(g, a);
          ops::gelu_backward(dg, b, a);
          const double sum_sq = ops::sum_squares({a});
          std::vector<int32_t> bits(2);
          std::memcpy(bits.data(), &sum_sq, sizeof sum_sq);
          const Tensor squares = Tensor::from_vector(bits, {2});
          const Tensor wide = Tensor::empty({kN}), narrow = Tensor::empty({kN}, DType::bf16);
          ops::cast(wide, a);
          ops::cast(narrow, wide);
          return std::vector<Tensor>{sum, y, x, g, dg, squares, wide, narrow};
        },
        "elementwise");
    const Tensor in = as(random_tensor({kRows, kC}, 3, -2.0f, 2.0f)),
                 w = as(random_tensor({kC}, 4)), bias = as(random_tensor({kC}, 5)),
                 dy = as(random_tensor({kRows, kC}, 6));
    expect_same_for_any_thread_count(
        [&] {
          const Tensor out = Tensor::empty(in.shape(), dtype),
                       d_in = Tensor::empty(in.shape(), dtype);
          const Tensor mean = Tensor::empty({kRows}), rstd = Tensor::empty({kRows});
          const Tensor dw = Tensor::zeros({kC}, dtype), db = Tensor::zeros({kC}, dtype);
          ops::layernorm_forward(out, mean, rstd, in, w, bias, 1e-5f);
          ops::layernorm_backward(d_in, dw, db, dy, in, w, mean, rstd);
          return std::vector<Tensor>{out, mean, rstd, d_in, dw, db};
        },
        "layernorm");
    const Tensor logits = as(random_tensor({kRows / 7, kV}, 7, -5.0f, 5.0f));
    std::vector<int32_t> ids(kRows / 7);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 37) % (kV + 10));
    const Tensor targets = Tensor::from_vector(ids, {static_cast<int64_t>(ids.size())});
    expect_same_for_any_thread_count(
        [&] {
          const int64_t n = logits.dim(0);
          const Tensor max = Tensor::empty({n}), sum = Tensor::empty({n}),
                       picked = Tensor::empty({n});
          const Tensor d = Tensor::empty(logits.shape(), dtype);
          ops::cross_entropy_row_max(max, logits);
          ops::cross_entropy_partials(sum, picked, logits, targets, max, 0);
          ops::cross_entropy_backward(d, logits, targets, max, sum, 0, 0.01f);
          return std::vector<Tensor>{max, sum, picked, d};
        },
        "cross_entropy");
    const Tensor qkv = as(random_tensor({3, 33, 3 * 24}, 8, -2.0f, 2.0f));
    const Tensor d_out = as(random_tensor({3, 33, 24}, 9));
    expect_same_for_any_thread_count(
        [&] {
          const Tensor out = Tensor::empty({3, 33, 24}, dtype);
          const Tensor d_qkv = Tensor::empty(qkv.shape(), dtype);
          ops::attention_forward(out, qkv, 4);
          ops::attention_backward(d_qkv, d_out, qkv, 4);
          return std::vector<Tensor>{out, d_qkv};
        },
        "attention");
    std::vector<int32_t> tokens(kRows);
    for (int64_t i = 0; i < kRows; ++i) tokens[i] = static_cast<int32_t>((i * i) % 1300);
    const Tensor token_ids = Tensor::from_vector(tokens, {kRows});
    const Tensor table = as(random_tensor({1000, kC}, 10));  // rows split across threads
    expect_same_for_any_thread_count(
        [&] {
          const Tensor out = Tensor::empty({kRows, kC}, dtype), d_table = table.clone();
          ops::embedding_forward(out, token_ids, table, 20);
          ops::embedding_backward(d_table, dy, token_ids, 20);
          return std::vector<Tensor>{out, d_table};
        },
        "embedding");
    // GEMMs of 777 rows: OpenBLAS's and oneDNN's sums depend on the size of each call, so the
    // blocks must not follow the thread count (gemm_blocks.h).
    const Tensor weight = as(random_tensor({kC, 300}, 13)), b300 = as(random_tensor({300}, 14));
    const Tensor dy300 = as(random_tensor({kRows, 300}, 15));
    expect_same_for_any_thread_count(
        [&] {
          const Tensor out = Tensor::empty({kRows, 300}, dtype), d_in = Tensor::empty(in.shape(), dtype);
          const Tensor d_w = Tensor::zeros(weight.shape(), dtype), d_b = Tensor::zeros({300}, dtype);
          ops::linear_forward(out, in, weight, b300);
          ops::linear_backward(d_in, d_w, d_b, dy300, in, weight);
          return std::vector<Tensor>{out, d_in, d_w, d_b};
        },
        "linear");
  }
  const Tensor p = random_tensor({100003}, 11), g = random_tensor({100003}, 12);
  expect_same_for_any_thread_count(
      [&] {
        const Tensor q = p.clone(), m = Tensor::zeros({100003}), v = Tensor::zeros({100003});
        ops::adamw_step(q, g, m, v, ops::AdamWHyper{}, 1);
        ops::adamw_step(q, g, m, v, ops::AdamWHyper{}, 2);
        return std::vector<Tensor>{q, m, v};
      },
      "adamw");
}

}  // namespace
}  // namespace meshtrain
