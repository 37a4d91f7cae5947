// Rotary position embedding forward and backward against the CPU kernel, at positions that start
// past 0.
#include <vector>

#include "meshtrain/core/ops/cpu/cpu_ops.h"
#include "meshtrain/core/ops/cuda/cuda_ops.h"
#include "tests/cuda/gpu_compare.h"

namespace meshtrain::test {
namespace {

constexpr int64_t kHeadDim = 16;
constexpr float kTheta = 500000.0f;  // Llama 3's
constexpr int64_t kFirst = 37;

// f32: the device's powf and sincosf are within 2 ulp of the host's, and an ulp of inv_freq grows
// with the position into the angle (inv_freq[0] = 1 exactly; the others are under 0.2, so the
// angles differ by under 2e-6 radians here). bf16: one rounding of the output (2^-9) on top.
Tolerance rotary_tolerance(DType dtype) {
  return dtype == DType::f32 ? Tolerance{1e-5, 2e-5} : Tolerance{8e-3, 1e-3};
}

class CudaRotaryTest : public ::testing::TestWithParam<DType> {};

TEST_P(CudaRotaryTest, ForwardAndBackwardMatchCpu) {
  MT_REQUIRE_GPU();
  const DType dtype = GetParam();
  const Shape shape = {2, 41, 3 * kHeadDim};
  const Operand x = random_operand(shape, dtype, 1);
  ops::cpu::rotary_forward(x.cpu, kHeadDim, kTheta, kFirst);
  ops::cuda::rotary_forward(x.gpu, kHeadDim, kTheta, kFirst);
  expect_close(x.gpu, x.cpu, rotary_tolerance(dtype), "forward");

  const Operand d_x = random_operand(shape, dtype, 2);
  ops::cpu::rotary_backward(d_x.cpu, kHeadDim, kTheta, kFirst);
  ops::cuda::rotary_backward(d_x.gpu, kHeadDim, kTheta, kFirst);
  expect_close(d_x.gpu, d_x.cpu, rotary_tolerance(dtype), "backward");
}

TEST(CudaRotary, BackwardUndoesForward) {
  MT_REQUIRE_GPU();
  const Operand x = random_operand({3, 29, 2 * kHeadDim}, DType::f32, 3);
  ops::cuda::rotary_forward(x.gpu, kHeadDim, kTheta, kFirst);
  ops::cuda::rotary_backward(x.gpu, kHeadDim, kTheta, kFirst);
  expect_close(x.gpu, x.cpu, Tolerance{0.0, 1e-6}, "x");
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaRotaryTest, ::testing::Values(DType::f32, DType::bf16),
                         dtype_case_name);

}  // namespace
}  // namespace meshtrain::test
