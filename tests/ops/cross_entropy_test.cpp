// Cross-entropy against closed forms (including logits that overflow a naive exp) and a double
// reference; backward against softmax - onehot and against finite differences. A slice in the
// middle of the vocabulary against naive loops, and two slices combined as tensor-parallel ranks
// combine them against the single slice.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "meshtrain/core/error.h"
#include "meshtrain/core/ops/ops.h"
#include "tests/ops/grad_check.h"
#include "tests/ops/test_tensors.h"
#include "tests/support/error_message.h"

namespace meshtrain {
namespace {

using test::random_tensor;

// The statistics one slice contributes, and the loss they give once combined.
struct RowStats {
  Tensor row_max, sum_exp, target_logit;

  explicit RowStats(int64_t rows)
      : row_max(Tensor::empty({rows})),
        sum_exp(Tensor::empty({rows})),
        target_logit(Tensor::empty({rows})) {}

  // loss[n] = log(sum_exp[n]) + row_max[n] - target_logit[n].
  std::vector<double> losses() const {
    const std::vector<float> max = row_max.to_vector(), sum = sum_exp.to_vector(),
                             picked = target_logit.to_vector();
    std::vector<double> out;
    for (size_t n = 0; n < max.size(); ++n)
      out.push_back(std::log(static_cast<double>(sum[n])) + max[n] - picked[n]);
    return out;
  }
};

// The plain cross-entropy: the whole vocabulary as one slice.
RowStats whole_vocabulary_stats(const Tensor& logits, const Tensor& targets) {
  RowStats s(targets.numel());
  ops::cross_entropy_row_max(s.row_max, logits);
  ops::cross_entropy_partials(s.sum_exp, s.target_logit, logits, targets, s.row_max, 0);
  return s;
}

void expect_losses_near(const std::vector<double>& got, const std::vector<double>& want,
                        double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t n = 0; n < got.size(); ++n) EXPECT_NEAR(got[n], want[n], tol) << "loss " << n;
}

TEST(OpsCrossEntropy, ClosedFormsAndLargeLogits) {
  const Tensor logits = Tensor::from_vector(
      std::vector<float>{0, 0, 0, 0, 1000, 1001, 999, -1e30f, 1000, 1001, 999, -1e30f}, {3, 4});
  const Tensor targets = Tensor::from_vector(std::vector<int32_t>{2, 1, 0}, {3});
  const RowStats s = whole_vocabulary_stats(logits, targets);
  test::expect_all_near(s.row_max, {0, 1001, 1001}, 0.0, "row_max");
  // Uniform logits: log V. Shifted by the max 1001: log(1 + e^-1 + e^-2) (+ 1 for target 0).
  const double tail = std::log(1.0 + std::exp(-1.0) + std::exp(-2.0));
  expect_losses_near(s.losses(), {std::log(4.0), tail, 1.0 + tail}, 1e-5);
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
  const RowStats s = whole_vocabulary_stats(logits, targets);
  const Tensor d_logits = Tensor::empty({kN, kV});
  ops::cross_entropy_backward(d_logits, logits, targets, s.row_max, s.sum_exp, 0, kScale);

  const std::vector<float> x = logits.to_vector();
  std::vector<double> want_loss, want_grad;
  for (int64_t n = 0; n < kN; ++n) {
    const std::vector<double> p = softmax(x, n, kV);
    want_loss.push_back(-std::log(p[target_ids[n]]));
    for (int64_t v = 0; v < kV; ++v) want_grad.push_back(kScale * (p[v] - (v == target_ids[n])));
  }
  expect_losses_near(s.losses(), want_loss, 1e-5);
  test::expect_all_near(d_logits, want_grad, 1e-6, "d_logits");
}

TEST(OpsCrossEntropy, BackwardMatchesFiniteDifferencesOfTheScaledSum) {
  constexpr int64_t kN = 3, kV = 5;
  constexpr float kScale = 1.0f / kN;  // the mean over the batch's tokens
  const Tensor logits = random_tensor({kN, kV}, 2);
  const Tensor targets = Tensor::from_vector(std::vector<int32_t>{4, 0, 2}, {kN});
  const auto loss = [&] {
    double sum = 0.0;
    for (double l : whole_vocabulary_stats(logits, targets).losses()) sum += kScale * l;
    return sum;
  };
  const RowStats s = whole_vocabulary_stats(logits, targets);
  const Tensor d_logits = Tensor::empty({kN, kV});
  ops::cross_entropy_backward(d_logits, logits, targets, s.row_max, s.sum_exp, 0, kScale);
  test::expect_grad_near(d_logits, test::numeric_grad(logits, loss), "d_logits");
}

// Columns [4, 9) of a 12-token vocabulary; targets below, at both ends of, inside and above the
// slice. row_max comes from "all slices": above the slice's own maximum for some rows.
TEST(OpsCrossEntropy, SliceInTheMiddleMatchesNaiveLoops) {
  constexpr int64_t kN = 6, kV = 5, kStart = 4;
  constexpr float kScale = 0.5f;
  const std::vector<int32_t> target_ids = {0, 4, 6, 8, 9, 11};
  const Tensor logits = random_tensor({kN, kV}, 3, -3.0f, 3.0f);
  const Tensor targets = Tensor::from_vector(target_ids, {kN});
  const std::vector<float> global_max = {3.5f, 2.0f, 4.0f, 3.0f, 5.0f, 3.25f};
  const Tensor row_max = Tensor::from_vector(global_max, {kN});
  const std::vector<float> total = {9.0f, 2.5f, 3.0f, 1.5f, 4.0f, 6.0f};  // sum_exp of all slices
  const Tensor sum_exp = Tensor::from_vector(total, {kN});

  const Tensor own_max = Tensor::empty({kN});
  ops::cross_entropy_row_max(own_max, logits);
  const Tensor partial_sum = Tensor::empty({kN}), target_logit = Tensor::empty({kN});
  ops::cross_entropy_partials(partial_sum, target_logit, logits, targets, row_max, kStart);
  const Tensor d_logits = Tensor::empty({kN, kV});
  ops::cross_entropy_backward(d_logits, logits, targets, row_max, sum_exp, kStart, kScale);

  const std::vector<float> x = logits.to_vector();
  std::vector<double> want_max, want_sum, want_picked, want_grad;
  for (int64_t n = 0; n < kN; ++n) {
    const float* row = x.data() + n * kV;
    want_max.push_back(*std::max_element(row, row + kV));
    double sum = 0.0;
    for (int64_t v = 0; v < kV; ++v) sum += std::exp(static_cast<double>(row[v]) - global_max[n]);
    want_sum.push_back(sum);
    const int64_t column = target_ids[n] - kStart;
    const bool inside = column >= 0 && column < kV;
    want_picked.push_back(inside ? row[column] : 0.0);
    for (int64_t v = 0; v < kV; ++v)
      want_grad.push_back(
          kScale *
          (std::exp(static_cast<double>(row[v]) - global_max[n]) / total[n] - (v == column)));
  }
  test::expect_all_near(own_max, want_max, 0.0, "row_max");
  test::expect_all_near(partial_sum, want_sum, 1e-6, "sum_exp");
  test::expect_all_near(target_logit, want_picked, 0.0, "target_logit");
  test::expect_all_near(d_logits, want_grad, 1e-6, "d_logits");
}

std::vector<double> doubles(const Tensor& t) {
  const std::vector<float> values = t.to_vector();
  return {values.begin(), values.end()};
}

// Columns [v0, v0 + width) of every row, as their own [N, width] tensor.
Tensor columns(const Tensor& logits, int64_t v0, int64_t width) {
  const int64_t rows = logits.dim(0), vocab = logits.dim(1);
  const std::vector<float> x = logits.to_vector();
  std::vector<float> out;
  for (int64_t n = 0; n < rows; ++n)
    out.insert(out.end(), x.begin() + n * vocab + v0, x.begin() + n * vocab + v0 + width);
  return Tensor::from_vector(out, {rows, width});
}

// Two tensor-parallel ranks holding columns [0, 4) and [4, 9) of a 9-token vocabulary, combined as
// the caller combines them (max of row_max, sums of sum_exp and target_logit), give the losses and
// gradients of the single slice. The largest logit of some rows lies in each slice, and targets in
// both.
TEST(OpsCrossEntropy, TwoSlicesReproduceTheSingleSlice) {
  constexpr int64_t kN = 5, kV = 9, kSplit = 4;
  constexpr float kScale = 1.0f / kN;
  const Tensor logits = random_tensor({kN, kV}, 4, -5.0f, 5.0f);
  const Tensor targets = Tensor::from_vector(std::vector<int32_t>{0, 3, 4, 8, 6}, {kN});
  const RowStats whole = whole_vocabulary_stats(logits, targets);
  const Tensor d_whole = Tensor::empty({kN, kV});
  ops::cross_entropy_backward(d_whole, logits, targets, whole.row_max, whole.sum_exp, 0, kScale);

  const Tensor slices[2] = {columns(logits, 0, kSplit), columns(logits, kSplit, kV - kSplit)};
  const int64_t starts[2] = {0, kSplit};
  RowStats part[2] = {RowStats(kN), RowStats(kN)};
  for (int r = 0; r < 2; ++r) ops::cross_entropy_row_max(part[r].row_max, slices[r]);
  RowStats combined(kN);  // what an all-reduce (max, then sums) leaves on every rank
  for (int64_t n = 0; n < kN; ++n)
    combined.row_max.data<float>()[n] =
        std::max(part[0].row_max.data<float>()[n], part[1].row_max.data<float>()[n]);
  for (int r = 0; r < 2; ++r)
    ops::cross_entropy_partials(part[r].sum_exp, part[r].target_logit, slices[r], targets,
                                combined.row_max, starts[r]);
  ops::add(combined.sum_exp, part[0].sum_exp, part[1].sum_exp);
  ops::add(combined.target_logit, part[0].target_logit, part[1].target_logit);

  test::expect_all_near(combined.row_max, doubles(whole.row_max), 0.0, "row_max");
  expect_losses_near(combined.losses(), whole.losses(), 1e-5);
  for (int r = 0; r < 2; ++r) {
    const Tensor d_slice = Tensor::empty(slices[r].shape());
    ops::cross_entropy_backward(d_slice, slices[r], targets, combined.row_max, combined.sum_exp,
                                starts[r], kScale);
    test::expect_all_near(d_slice, doubles(columns(d_whole, starts[r], slices[r].dim(1))), 1e-7,
                          "d_logits");
  }
}

TEST(OpsCrossEntropyValidation, ShapesDtypesAndVocabStart) {
  const Tensor logits = Tensor::zeros({2, 3});
  const Tensor targets = Tensor::from_vector(std::vector<int32_t>{0, 7}, {2});
  const Tensor stat = Tensor::zeros({2});
  testing::expect_error<InvalidArgument>(
      [&] {
        ops::cross_entropy_row_max(stat, Tensor::zeros({2, 0}));
      },
      "cross_entropy_row_max: logits must be [..., V] with V >= 1, got f32[2, 0] on cpu");
  testing::expect_error<InvalidArgument>(
      [&] { ops::cross_entropy_row_max(Tensor::zeros({3}), logits); },
      "cross_entropy_row_max: row_max must hold one value per row of logits, N = 2 elements, got "
      "f32[3] on cpu");
  testing::expect_error<InvalidArgument>(
      [&] { ops::cross_entropy_row_max(Tensor::zeros({2}, DType::bf16), logits); },
      "cross_entropy_row_max: row_max must be f32, got bf16[2] on cpu");
  testing::expect_error<InvalidArgument>(
      [&] {
        ops::cross_entropy_partials(stat, stat, logits, Tensor::empty({3}, DType::i32), stat, 0);
      },
      "cross_entropy_partials: targets must hold one id per row of logits, N = 2 elements, got "
      "i32[3] on cpu");
  testing::expect_error<InvalidArgument>(
      [&] { ops::cross_entropy_partials(stat, stat, logits, Tensor::zeros({2}), stat, 0); },
      "cross_entropy_partials: targets must be i32, got f32[2] on cpu");
  testing::expect_error<InvalidArgument>(
      [&] { ops::cross_entropy_partials(stat, Tensor::zeros({1}), logits, targets, stat, 0); },
      "cross_entropy_partials: target_logit must hold one value per row of logits, N = 2 "
      "elements, got f32[1] on cpu");
  testing::expect_error<InvalidArgument>(
      [&] { ops::cross_entropy_partials(stat, stat, logits, targets, stat, -2); },
      "cross_entropy_partials: vocab_start must be >= 0, got -2");
  testing::expect_error<InvalidArgument>(
      [&] {
        ops::cross_entropy_backward(Tensor::zeros({2, 4}), logits, targets, stat, stat, 0, 1.0f);
      },
      "cross_entropy_backward: d_logits must be [N, V] like logits = [2, 3] after flattening, got "
      "f32[2, 4] on cpu");
  testing::expect_error<InvalidArgument>(
      [&] {
        ops::cross_entropy_backward(logits, logits, targets, stat, Tensor::zeros({2}, DType::i32),
                                    0, 1.0f);
      },
      "cross_entropy_backward: sum_exp must be f32, got i32[2] on cpu");
  testing::expect_error<InvalidArgument>(
      [&] { ops::cross_entropy_backward(logits, logits, targets, stat, stat, 0, NAN); },
      "cross_entropy_backward: scale must be finite, got nan");
}

}  // namespace
}  // namespace meshtrain
