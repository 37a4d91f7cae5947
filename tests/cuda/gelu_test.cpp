// GELU (tanh approximation) forward and backward against the CPU kernel.
#include "meshtrain/core/ops/cpu/cpu_ops.h"
#include "meshtrain/core/ops/cuda/cuda_ops.h"
#include "tests/cuda/gpu_compare.h"

namespace meshtrain::test {
namespace {

// f32: device tanhf is within 2 ulp of std::tanh, but near x = -5 both 1 + tanh(u) and
// 1 - tanh^2(u) cancel, turning that ulp into ~2e-6 absolute in the gradient. bf16: one rounding
// of the output (2^-9) on top.
Tolerance gelu_tolerance(DType dtype) {
  return dtype == DType::f32 ? Tolerance{1e-5, 1e-5} : Tolerance{8e-3, 1e-4};
}

class CudaGeluTest : public ::testing::TestWithParam<DType> {};

TEST_P(CudaGeluTest, ForwardAndBackwardMatchCpu) {
  MT_REQUIRE_GPU();
  const DType dtype = GetParam();
  const Shape shape = {4099};  // not a multiple of the block size
  const Operand in = random_operand(shape, dtype, 1, -5.0f, 5.0f);
  const Operand out = zeros_operand(shape, dtype);
  ops::cpu::gelu_forward(out.cpu, in.cpu);
  ops::cuda::gelu_forward(out.gpu, in.gpu);
  expect_close(out.gpu, out.cpu, gelu_tolerance(dtype), "out");

  const Operand d_out = random_operand(shape, dtype, 2);
  const Operand d_in = random_operand(shape, dtype, 3);  // overwritten
  ops::cpu::gelu_backward(d_in.cpu, d_out.cpu, in.cpu);
  ops::cuda::gelu_backward(d_in.gpu, d_out.gpu, in.gpu);
  expect_close(d_in.gpu, d_in.cpu, gelu_tolerance(dtype), "d_in");
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaGeluTest, ::testing::Values(DType::f32, DType::bf16),
                         dtype_case_name);

}  // namespace
}  // namespace meshtrain::test
