// RMSNorm forward and backward against the CPU kernel.
#include <tuple>

#include "meshtrain/core/ops/cpu/cpu_ops.h"
#include "meshtrain/core/ops/cuda/cuda_ops.h"
#include "tests/cuda/gpu_compare.h"

namespace meshtrain::test {
namespace {

constexpr float kEps = 1e-5f;

// f32: row sums in another order (~1e-6). bf16: inputs identical, f32 arithmetic, one rounding of
// each bf16 output (2^-9 relative). rstd is f32 in both cases, so it stays tight.
Tolerance output_tolerance(DType dtype) {
  return dtype == DType::f32 ? Tolerance{1e-5, 1e-5} : Tolerance{8e-3, 1e-3};
}
constexpr Tolerance kRstdTolerance{1e-5, 1e-6};

// Channel counts below, at and above a warp's 32 lanes, not multiples of it.
class CudaRmsNormTest : public ::testing::TestWithParam<std::tuple<DType, int64_t>> {};

TEST_P(CudaRmsNormTest, ForwardMatchesCpu) {
  MT_REQUIRE_GPU();
  const auto [dtype, channels] = GetParam();
  const Shape shape = {2, 7, channels};
  const Operand in = random_operand(shape, dtype, 1, -2.0f, 3.0f);
  const Operand weight = random_operand({channels}, dtype, 2, 0.5f, 1.5f);
  const Operand out = zeros_operand(shape, dtype);
  const Operand rstd = zeros_operand({14}, DType::f32);
  ops::cpu::rmsnorm_forward(out.cpu, rstd.cpu, in.cpu, weight.cpu, kEps);
  ops::cuda::rmsnorm_forward(out.gpu, rstd.gpu, in.gpu, weight.gpu, kEps);
  expect_close(out.gpu, out.cpu, output_tolerance(dtype), "out");
  expect_close(rstd.gpu, rstd.cpu, kRstdTolerance, "rstd");
}

TEST_P(CudaRmsNormTest, BackwardMatchesCpu) {
  MT_REQUIRE_GPU();
  const auto [dtype, channels] = GetParam();
  const Shape shape = {2, 7, channels};
  const Operand in = random_operand(shape, dtype, 4, -2.0f, 3.0f);
  const Operand weight = random_operand({channels}, dtype, 5, 0.5f, 1.5f);
  // The saved rstd comes from the CPU forward, so backward is checked on its own.
  const Operand out = zeros_operand(shape, DType::f32);
  Tensor rstd = Tensor::zeros({14});
  ops::cpu::rmsnorm_forward(out.cpu, rstd, in.cpu, weight.cpu, kEps);
  const Operand saved_rstd = same_on_both(rstd);

  const Operand d_out = random_operand(shape, dtype, 7);
  const Operand d_in = random_operand(shape, dtype, 8);           // overwritten
  const Operand d_weight = random_operand({channels}, dtype, 9);  // accumulates
  ops::cpu::rmsnorm_backward(d_in.cpu, d_weight.cpu, d_out.cpu, in.cpu, weight.cpu, saved_rstd.cpu);
  ops::cuda::rmsnorm_backward(d_in.gpu, d_weight.gpu, d_out.gpu, in.gpu, weight.gpu,
                              saved_rstd.gpu);
  const Tolerance tol = output_tolerance(dtype);
  expect_close(d_in.gpu, d_in.cpu, tol, "d_in");
  expect_close(d_weight.gpu, d_weight.cpu, tol, "d_weight");

  // A frozen weight (no d_weight): the same d_in.
  const Operand d_in_frozen = random_operand(shape, dtype, 10);
  ops::cuda::rmsnorm_backward(d_in_frozen.gpu, Tensor(), d_out.gpu, in.gpu, weight.gpu,
                              saved_rstd.gpu);
  expect_close(d_in_frozen.gpu, d_in.cpu, tol, "d_in without d_weight");
}

// Training's row counts: d_weight sums over many slabs of rows (kernel_utils.cuh), the last one
// partial. Sums of 8320 terms in another order: f32 agrees to 1e-4 relative, with an absolute
// floor for columns that sum to nearly zero.
TEST(CudaRmsNorm, BackwardSumsThousandsOfRows) {
  MT_REQUIRE_GPU();
  constexpr int64_t channels = 200;
  const Shape shape = {16, 520, channels};
  const int64_t rows = 16 * 520;
  for (const DType dtype : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const Operand in = random_operand(shape, dtype, 11, -2.0f, 3.0f);
    const Operand weight = random_operand({channels}, dtype, 12, 0.5f, 1.5f);
    const Operand out = zeros_operand(shape, DType::f32);
    Tensor rstd = Tensor::zeros({rows});
    ops::cpu::rmsnorm_forward(out.cpu, rstd, in.cpu, weight.cpu, kEps);
    const Operand saved_rstd = same_on_both(rstd);
    const Operand d_out = random_operand(shape, dtype, 14);
    const Operand d_in = zeros_operand(shape, dtype);
    const Operand d_weight = random_operand({channels}, dtype, 15);
    ops::cpu::rmsnorm_backward(d_in.cpu, d_weight.cpu, d_out.cpu, in.cpu, weight.cpu,
                               saved_rstd.cpu);
    ops::cuda::rmsnorm_backward(d_in.gpu, d_weight.gpu, d_out.gpu, in.gpu, weight.gpu,
                                saved_rstd.gpu);
    const Tolerance sums = dtype == DType::f32 ? Tolerance{1e-4, 1e-3} : Tolerance{8e-3, 1e-2};
    expect_close(d_in.gpu, d_in.cpu, output_tolerance(dtype), "d_in");
    expect_close(d_weight.gpu, d_weight.cpu, sums, "d_weight");
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaRmsNormTest,
                         ::testing::Combine(::testing::Values(DType::f32, DType::bf16),
                                            ::testing::Values(int64_t{5}, int64_t{33},
                                                              int64_t{200})));

}  // namespace
}  // namespace meshtrain::test
