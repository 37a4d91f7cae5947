// linear_forward against plain loops; linear_backward against finite differences and its "+=".
#include <gtest/gtest.h>

#include "meshtrain/core/error.h"
#include "meshtrain/core/ops/ops.h"
#include "tests/ops/bf16_reference.h"
#include "tests/ops/grad_check.h"
#include "tests/ops/test_tensors.h"
#include "tests/support/error_message.h"

namespace meshtrain {
namespace {

using test::bf16_copy;
using test::expect_bf16_near;
using test::random_tensor;
using test::reference_product;

constexpr int64_t kRows = 6, kIn = 4, kOut = 5;

std::vector<double> naive_linear(const Tensor& in, const Tensor& weight, const Tensor& bias) {
  const std::vector<float> x = in.to_vector(), w = weight.to_vector();
  const std::vector<float> b = bias.defined() ? bias.to_vector() : std::vector<float>(kOut, 0.0f);
  std::vector<double> out(kRows * kOut);
  for (int64_t n = 0; n < kRows; ++n)
    for (int64_t o = 0; o < kOut; ++o) {
      double sum = b[o];
      for (int64_t i = 0; i < kIn; ++i)
        sum += static_cast<double>(x[n * kIn + i]) * w[i * kOut + o];
      out[n * kOut + o] = sum;
    }
  return out;
}

TEST(OpsLinear, ForwardMatchesNaiveLoopsWithLeadingDims) {
  const Tensor in = random_tensor({2, 3, kIn}, 1);  // [B, T, in]: B * T = kRows
  const Tensor weight = random_tensor({kIn, kOut}, 2);
  const Tensor bias = random_tensor({kOut}, 3);
  const Tensor out = Tensor::empty({2, 3, kOut});
  ops::linear_forward(out, in, weight, bias);
  test::expect_all_near(out, naive_linear(in, weight, bias), 1e-5, "with bias");
  ops::linear_forward(out, in, weight, Tensor());
  test::expect_all_near(out, naive_linear(in, weight, Tensor()), 1e-5, "without bias");
}

TEST(OpsLinear, BackwardMatchesFiniteDifferences) {
  const Tensor in = random_tensor({kRows, kIn}, 1);
  const Tensor weight = random_tensor({kIn, kOut}, 2);
  const Tensor bias = random_tensor({kOut}, 3);
  const Tensor d_out = random_tensor({kRows, kOut}, 4);
  const Tensor out = Tensor::empty({kRows, kOut});
  const auto loss = [&] {
    ops::linear_forward(out, in, weight, bias);
    return test::weighted_sum(out, d_out);
  };
  const Tensor d_in = Tensor::empty({kRows, kIn});
  const Tensor d_weight = Tensor::zeros({kIn, kOut});
  const Tensor d_bias = Tensor::zeros({kOut});
  ops::linear_backward(d_in, d_weight, d_bias, d_out, in, weight);
  test::expect_grad_near(d_in, test::numeric_grad(in, loss), "d_in");
  test::expect_grad_near(d_weight, test::numeric_grad(weight, loss), "d_weight");
  test::expect_grad_near(d_bias, test::numeric_grad(bias, loss), "d_bias");
}

// A frozen weight: no weight gradient is asked for, and the input gradient is the same.
TEST(OpsLinear, BackwardWithoutAWeightGradient) {
  const Tensor in = random_tensor({kRows, kIn}, 1);
  const Tensor weight = random_tensor({kIn, kOut}, 2);
  const Tensor d_out = random_tensor({kRows, kOut}, 4);
  const Tensor full = Tensor::empty({kRows, kIn}), input_only = Tensor::empty({kRows, kIn});
  ops::linear_backward(full, Tensor::zeros({kIn, kOut}), Tensor(), d_out, in, weight);
  ops::linear_backward(input_only, Tensor(), Tensor(), d_out, in, weight);
  EXPECT_EQ(input_only.to_vector(), full.to_vector());
}

TEST(OpsLinear, BackwardAccumulatesParameterGradients) {
  const Tensor in = random_tensor({kRows, kIn}, 1);
  const Tensor weight = random_tensor({kIn, kOut}, 2);
  const Tensor d_out = random_tensor({kRows, kOut}, 4);
  const Tensor d_weight = Tensor::zeros({kIn, kOut});
  const Tensor d_bias = Tensor::zeros({kOut});
  ops::linear_backward(Tensor(), d_weight, d_bias, d_out, in, weight);  // d_in skipped
  const std::vector<float> once_w = d_weight.to_vector(), once_b = d_bias.to_vector();
  ops::linear_backward(Tensor(), d_weight, d_bias, d_out, in, weight);
  const std::vector<float> twice_w = d_weight.to_vector(), twice_b = d_bias.to_vector();
  // Accumulating adds the same values again, up to the rounding of the running sums.
  for (size_t i = 0; i < once_w.size(); ++i) EXPECT_NEAR(twice_w[i], 2 * once_w[i], 1e-6);
  // d_bias is the column sums of d_out.
  const std::vector<float> dy = d_out.to_vector();
  for (int64_t o = 0; o < kOut; ++o) {
    double sum = 0.0;
    for (int64_t n = 0; n < kRows; ++n) sum += dy[n * kOut + o];
    EXPECT_NEAR(once_b[o], sum, 1e-5);
    EXPECT_NEAR(twice_b[o], 2 * once_b[o], 1e-6);
  }
}

TEST(OpsLinearValidation, WeightShapeMessageSaysWhatWasExpected) {
  testing::expect_error<InvalidArgument>(
      [] {
        ops::linear_forward(Tensor::empty({4, 2304}), Tensor::empty({4, 768}),
                            Tensor::empty({512, 768}), Tensor());
      },
      "linear_forward: weight must be [in, out] = [768, *], got f32[512, 768] on cpu");
}

TEST(OpsLinearValidation, OutputAndBiasShapes) {
  const Tensor in = Tensor::empty({6, 4}), weight = Tensor::empty({4, 5});
  testing::expect_error<InvalidArgument>(
      [&] {
        ops::linear_forward(Tensor::empty({5, 5}), in, weight, Tensor());
      },
      "linear_forward: out must be [N, out] = [6, 5] after flattening, got f32[5, 5] on cpu");
  testing::expect_error<InvalidArgument>(
      [&] {
        ops::linear_forward(Tensor::empty({6, 5}), in, weight, Tensor::empty({4}));
      },
      "linear_forward: bias must be [out] = [5], got f32[4] on cpu");
  testing::expect_error<InvalidArgument>(
      [&] {
        ops::linear_backward(Tensor(), Tensor::empty({4, 6}), Tensor(), Tensor::empty({6, 5}), in,
                             weight);
      },
      "linear_backward: d_weight must be [in, out] like weight = [4, 5], got f32[4, 6] on cpu");
}

TEST(OpsLinearValidation, UndefinedAndMixedDtypes) {
  const Tensor in = Tensor::empty({6, 4}), out = Tensor::empty({6, 5});
  testing::expect_error<InvalidArgument>([&] { ops::linear_forward(out, in, Tensor(), Tensor()); },
                                         "linear_forward: weight must be a defined tensor");
  testing::expect_error<InvalidArgument>(
      [&] {
        ops::linear_forward(out, in, Tensor::empty({4, 5}, DType::i32), Tensor());
      },
      "linear_forward: weight must be f32 or bf16, got i32[4, 5] on cpu");
  testing::expect_error<InvalidArgument>(
      [&] {
        ops::linear_forward(out, in, Tensor::empty({4, 5}, DType::bf16), Tensor());
      },
      "linear_forward: weight must have the dtype of in (f32), got bf16[4, 5] on cpu");
}

// bf16 runs on oneDNN with f32 accumulation (tests/ops/bf16_reference.h).
// Odd sizes, so that no dimension is a multiple of oneDNN's blocking.
constexpr int64_t kBigRows = 37, kBigIn = 70, kBigOut = 53;

TEST(OpsLinearBf16, ForwardIsTheRoundedProductOfTheBf16Inputs) {
  const Tensor in = bf16_copy(random_tensor({kBigRows, kBigIn}, 1));
  const Tensor weight = bf16_copy(random_tensor({kBigIn, kBigOut}, 2));
  const Tensor bias = bf16_copy(random_tensor({kBigOut}, 3));
  std::vector<double> expected =
      reference_product(in.to_vector(), weight.to_vector(), kBigRows, kBigIn, kBigOut, false, false);
  const Tensor out = Tensor::empty({kBigRows, kBigOut}, DType::bf16);
  ops::linear_forward(out, in, weight, Tensor());
  expect_bf16_near(out, expected, "without bias");
  const std::vector<float> b = bias.to_vector();
  for (int64_t r = 0; r < kBigRows; ++r)
    for (int64_t o = 0; o < kBigOut; ++o) expected[r * kBigOut + o] += b[o];
  ops::linear_forward(out, in, weight, bias);
  expect_bf16_near(out, expected, "with bias");
}

TEST(OpsLinearBf16, BackwardGradientsAndAccumulation) {
  const Tensor in = bf16_copy(random_tensor({kBigRows, kBigIn}, 1));
  const Tensor weight = bf16_copy(random_tensor({kBigIn, kBigOut}, 2));
  const Tensor d_out = bf16_copy(random_tensor({kBigRows, kBigOut}, 4));
  const Tensor d_weight = bf16_copy(random_tensor({kBigIn, kBigOut}, 5));  // earlier micro-batches
  const Tensor d_bias = bf16_copy(random_tensor({kBigOut}, 6));
  const std::vector<float> w0 = d_weight.to_vector(), b0 = d_bias.to_vector();
  const Tensor d_in = Tensor::empty({kBigRows, kBigIn}, DType::bf16);
  ops::linear_backward(d_in, d_weight, d_bias, d_out, in, weight);

  const std::vector<float> x = in.to_vector(), w = weight.to_vector(), dy = d_out.to_vector();
  expect_bf16_near(d_in, reference_product(dy, w, kBigRows, kBigOut, kBigIn, false, true), "d_in");
  std::vector<double> dw = reference_product(x, dy, kBigIn, kBigRows, kBigOut, true, false);
  for (size_t i = 0; i < dw.size(); ++i) dw[i] += w0[i];
  expect_bf16_near(d_weight, dw, "d_weight += in^T d_out");
  std::vector<double> db(b0.begin(), b0.end());
  for (int64_t r = 0; r < kBigRows; ++r)
    for (int64_t o = 0; o < kBigOut; ++o) db[o] += dy[r * kBigOut + o];
  expect_bf16_near(d_bias, db, "d_bias += column sums");
}

}  // namespace
}  // namespace meshtrain
