// SwiGLU forward and backward against the CPU kernel.
#include "meshtrain/core/ops/cpu/cpu_ops.h"
#include "meshtrain/core/ops/cuda/cuda_ops.h"
#include "tests/cuda/gpu_compare.h"

namespace meshtrain::test {
namespace {

// f32: device expf against the CPU's fast_exp, each within about 2 ulp. bf16: one rounding of the
// output (2^-9) on top.
Tolerance swiglu_tolerance(DType dtype) {
  return dtype == DType::f32 ? Tolerance{1e-5, 1e-6} : Tolerance{8e-3, 1e-4};
}

class CudaSwigluTest : public ::testing::TestWithParam<DType> {};

TEST_P(CudaSwigluTest, ForwardAndBackwardMatchCpu) {
  MT_REQUIRE_GPU();
  const DType dtype = GetParam();
  const Shape shape = {3, 1367};  // not a multiple of the block size
  const Operand gate = random_operand(shape, dtype, 1, -8.0f, 8.0f);
  const Operand up = random_operand(shape, dtype, 2);
  const Operand out = zeros_operand(shape, dtype);
  ops::cpu::swiglu_forward(out.cpu, gate.cpu, up.cpu);
  ops::cuda::swiglu_forward(out.gpu, gate.gpu, up.gpu);
  expect_close(out.gpu, out.cpu, swiglu_tolerance(dtype), "out");

  const Operand d_out = random_operand(shape, dtype, 3);
  const Operand d_gate = random_operand(shape, dtype, 4);  // overwritten
  const Operand d_up = random_operand(shape, dtype, 5);    // overwritten
  ops::cpu::swiglu_backward(d_gate.cpu, d_up.cpu, d_out.cpu, gate.cpu, up.cpu);
  ops::cuda::swiglu_backward(d_gate.gpu, d_up.gpu, d_out.gpu, gate.gpu, up.gpu);
  expect_close(d_gate.gpu, d_gate.cpu, swiglu_tolerance(dtype), "d_gate");
  expect_close(d_up.gpu, d_up.cpu, swiglu_tolerance(dtype), "d_up");
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaSwigluTest, ::testing::Values(DType::f32, DType::bf16),
                         dtype_case_name);

}  // namespace
}  // namespace meshtrain::test
