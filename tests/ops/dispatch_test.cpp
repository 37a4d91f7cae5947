// The dispatch layer's rules shared by every op: defined tensors, f32 on the CPU, one dtype per
// call.
#include <gtest/gtest.h>

#include "core/error.h"
#include "core/ops/ops.h"
#include "tests/support/error_message.h"

namespace meshtrain {
namespace {

TEST(OpsDispatch, Bf16ActivationsOnCpuAreNotSupported) {
  const Tensor x = Tensor::zeros({4}, DType::bf16);
  testing::expect_error<NotSupported>(
      [&] { ops::gelu_forward(x, x); },
      "gelu_forward: CPU kernels compute in f32, got in = bf16[4] on "
      "cpu (convert it with ops::cast)");
}

TEST(OpsDispatch, IntegerActivationsAreRejected) {
  const Tensor x = Tensor::zeros({4}, DType::i32);
  testing::expect_error<InvalidArgument>([&] { (void)ops::sum_squares(x); },
                                         "sum_squares: x must be f32 or bf16, got i32[4] on cpu");
}

TEST(OpsDispatch, UndefinedTensorsAreNamed) {
  testing::expect_error<InvalidArgument>([] { ops::scale(Tensor(), 1.0f); },
                                         "scale: x must be a defined tensor");
  testing::expect_error<InvalidArgument>([] { ops::cast(Tensor::empty({1}), Tensor()); },
                                         "cast: in must be a defined tensor");
}

}  // namespace
}  // namespace meshtrain
