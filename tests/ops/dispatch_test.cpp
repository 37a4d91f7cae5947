// The dispatch layer's rules shared by every op: defined tensors, f32 or bf16, one dtype per
// call.
#include <gtest/gtest.h>

#include "meshtrain/core/error.h"
#include "meshtrain/core/ops/ops.h"
#include "tests/support/error_message.h"

namespace meshtrain {
namespace {

TEST(OpsDispatch, Bf16ActivationsOnCpuAreAcceptedButNotMixedWithF32) {
  const Tensor x = Tensor::from_vector(std::vector<float>{-1.0f, 0.0f, 1.0f, 2.0f}, {4});
  const Tensor narrow = Tensor::empty({4}, DType::bf16), y = Tensor::empty({4}, DType::bf16);
  ops::cast(narrow, x);
  ops::scale(narrow, 2.0f);
  ops::add(y, narrow, narrow);
  EXPECT_EQ(y.to_vector(), (std::vector<float>{-4, 0, 4, 8}));
  testing::expect_error<InvalidArgument>(
      [&] { ops::gelu_forward(x, narrow); },
      "gelu_forward: out must have the dtype of in (bf16), got f32[4] on cpu");
}

TEST(OpsDispatch, IntegerActivationsAreRejected) {
  const Tensor x = Tensor::zeros({4}, DType::i32);
  testing::expect_error<InvalidArgument>(
      [&] { (void)ops::sum_squares({x}); },
      "sum_squares: xs[0] must be f32 or bf16, got i32[4] on cpu");
}

TEST(OpsDispatch, UndefinedTensorsAreNamed) {
  testing::expect_error<InvalidArgument>([] { ops::scale(Tensor(), 1.0f); },
                                         "scale: x must be a defined tensor");
  testing::expect_error<InvalidArgument>([] { ops::cast(Tensor::empty({1}), Tensor()); },
                                         "cast: in must be a defined tensor");
}

}  // namespace
}  // namespace meshtrain
