// add, axpy, scale and sum_squares on exactly representable values.
#include <gtest/gtest.h>

#include "meshtrain/core/error.h"
#include "meshtrain/core/ops/ops.h"
#include "tests/ops/test_tensors.h"
#include "tests/support/error_message.h"

namespace meshtrain {
namespace {

Tensor vec(const std::vector<float>& values) {
  return Tensor::from_vector(values, {static_cast<int64_t>(values.size())});
}

TEST(OpsElementwise, AddAxpyScale) {
  const Tensor a = vec({1, 2, -3, 0.5f}), b = vec({10, -20, 30, 0.25f});
  const Tensor out = Tensor::empty({2, 2});
  ops::add(out, a, b);
  EXPECT_EQ(out.to_vector(), (std::vector<float>{11, -18, 27, 0.75f}));
  ops::axpy(out, -2.0f, a);
  EXPECT_EQ(out.to_vector(), (std::vector<float>{9, -22, 33, -0.25f}));
  ops::scale(out, 0.5f);
  EXPECT_EQ(out.to_vector(), (std::vector<float>{4.5f, -11, 16.5f, -0.125f}));
  ops::add(a, a, b);  // in place, as the residual stream is updated
  EXPECT_EQ(a.to_vector(), (std::vector<float>{11, -18, 27, 0.75f}));
}

TEST(OpsElementwise, SumSquaresAccumulatesInDouble) {
  // 1e4^2 = 1e8, whose f32 spacing is 8: an f32 accumulator would drop every 0.25^2 that follows.
  std::vector<float> values(1000, 0.25f);
  values.insert(values.begin(), 1e4f);
  EXPECT_DOUBLE_EQ(ops::sum_squares({vec(values)}), 1e8 + 1000 * 0.0625);
  EXPECT_DOUBLE_EQ(ops::sum_squares({Tensor::empty({0})}), 0.0);
  EXPECT_DOUBLE_EQ(ops::sum_squares({}), 0.0);
}

TEST(OpsElementwise, SumSquaresAddsUpEveryTensor) {
  EXPECT_DOUBLE_EQ(ops::sum_squares({vec({3}), Tensor::empty({0}), vec({1, 2, 2}), vec({0.5f})}),
                   9 + 9 + 0.25);
  testing::expect_error<InvalidArgument>(
      [] {
        (void)ops::sum_squares({vec({1}), Tensor::zeros({2}, DType::bf16)});
      },
      "sum_squares: xs[1] must have the dtype of xs[0] (f32)");
}

TEST(OpsElementwise, EmptyTensorsAreNoOps) {
  const Tensor empty = Tensor::empty({0, 3});
  ops::add(empty, empty, empty);
  ops::axpy(empty, 2.0f, empty);
  ops::scale(empty, 2.0f);
}

TEST(OpsElementwiseValidation, SizesMustMatch) {
  testing::expect_error<InvalidArgument>(
      [] {
        ops::axpy(vec({1, 2}), 1.0f, vec({1, 2, 3}));
      },
      "axpy: x must hold the elements of y = 2 elements, got f32[3]");
  testing::expect_error<InvalidArgument>(
      [] {
        ops::add(vec({1}), vec({1, 2}), vec({1, 2}));
      },
      "add: out must hold the elements of a = 2 elements, got f32[1]");
  testing::expect_error<InvalidArgument>(
      [] { ops::axpy(Tensor::zeros({2}, DType::bf16), 1.0f, vec({1, 2})); },
      "axpy: x must have the dtype of y (bf16), got f32[2] on cpu");
}

}  // namespace
}  // namespace meshtrain
