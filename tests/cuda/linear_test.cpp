// The GPT-2 linear layer (weight [in, out]) on cuBLAS against the CPU kernel.
#include "meshtrain/core/ops/cpu/cpu_ops.h"
#include "meshtrain/core/ops/cuda/cuda_ops.h"
#include "tests/cuda/gpu_compare.h"

namespace meshtrain::test {
namespace {

constexpr int64_t kIn = 24, kOut = 40;
const Shape kBatchShape = {2, 5};  // leading dims flatten into 10 rows

Shape with_last(int64_t last) { return {kBatchShape[0], kBatchShape[1], last}; }

// As for matmul: f32 differs only by summation order; bf16 outputs (and the bf16 gradients that
// accumulate into bf16 buffers) are rounded once from f32 sums of identical inputs.
Tolerance linear_tolerance(DType dtype) {
  return dtype == DType::f32 ? Tolerance{1e-5, 1e-5} : Tolerance{8e-3, 1e-3};
}

class CudaLinearTest : public ::testing::TestWithParam<DType> {};

TEST_P(CudaLinearTest, ForwardMatchesCpu) {
  MT_REQUIRE_GPU();
  const DType dtype = GetParam();
  const Operand in = random_operand(with_last(kIn), dtype, 1);
  const Operand weight = random_operand({kIn, kOut}, dtype, 2);
  const Operand bias = random_operand({kOut}, dtype, 3);
  for (bool with_bias : {true, false}) {
    const Operand out = random_operand(with_last(kOut), dtype, 4);  // overwritten
    ops::cpu::linear_forward(out.cpu, in.cpu, weight.cpu, with_bias ? bias.cpu : Tensor());
    ops::cuda::linear_forward(out.gpu, in.gpu, weight.gpu, with_bias ? bias.gpu : Tensor());
    expect_close(out.gpu, out.cpu, linear_tolerance(dtype), with_bias ? "out" : "out, no bias");
  }
}

TEST_P(CudaLinearTest, BackwardMatchesCpu) {
  MT_REQUIRE_GPU();
  const DType dtype = GetParam();
  const Operand in = random_operand(with_last(kIn), dtype, 5);
  const Operand weight = random_operand({kIn, kOut}, dtype, 6);
  const Operand d_out = random_operand(with_last(kOut), dtype, 7);
  const Operand d_in = random_operand(with_last(kIn), dtype, 8);  // overwritten
  // Parameter gradients accumulate: start from non-zero values.
  const Operand d_weight = random_operand({kIn, kOut}, dtype, 9);
  const Operand d_bias = random_operand({kOut}, dtype, 10);
  ops::cpu::linear_backward(d_in.cpu, d_weight.cpu, d_bias.cpu, d_out.cpu, in.cpu, weight.cpu);
  ops::cuda::linear_backward(d_in.gpu, d_weight.gpu, d_bias.gpu, d_out.gpu, in.gpu, weight.gpu);
  const Tolerance tol = linear_tolerance(dtype);
  expect_close(d_in.gpu, d_in.cpu, tol, "d_in");
  expect_close(d_weight.gpu, d_weight.cpu, tol, "d_weight");
  expect_close(d_bias.gpu, d_bias.cpu, tol, "d_bias");
}

TEST_P(CudaLinearTest, BackwardWithoutInputAndBiasGradients) {
  MT_REQUIRE_GPU();
  const DType dtype = GetParam();
  const Operand in = random_operand(with_last(kIn), dtype, 11);
  const Operand weight = random_operand({kIn, kOut}, dtype, 12);
  const Operand d_out = random_operand(with_last(kOut), dtype, 13);
  const Operand d_weight = random_operand({kIn, kOut}, dtype, 14);
  ops::cpu::linear_backward(Tensor(), d_weight.cpu, Tensor(), d_out.cpu, in.cpu, weight.cpu);
  ops::cuda::linear_backward(Tensor(), d_weight.gpu, Tensor(), d_out.gpu, in.gpu, weight.gpu);
  expect_close(d_weight.gpu, d_weight.cpu, linear_tolerance(dtype), "d_weight");
}

// The bias gradient over training's row counts: 257 rows make two slabs of column sums, the
// second of one row, and 4100 rows make 17 (meshtrain/core/ops/cuda/kernel_utils.cuh); 20 columns fill
// less than one block's 32. Long sums in another order: f32 to 1e-4 relative, with a floor.
TEST_P(CudaLinearTest, BiasGradientSumsManyRows) {
  MT_REQUIRE_GPU();
  const DType dtype = GetParam();
  constexpr int64_t in_features = 16, out_features = 20;
  for (const int64_t rows : {int64_t{257}, int64_t{4100}}) {
    SCOPED_TRACE(rows);
    const Operand in = random_operand({rows, in_features}, dtype, 15);
    const Operand weight = random_operand({in_features, out_features}, dtype, 16);
    const Operand d_out = random_operand({rows, out_features}, dtype, 17);
    const Operand d_weight = random_operand({in_features, out_features}, dtype, 18);
    const Operand d_bias = random_operand({out_features}, dtype, 19);
    ops::cpu::linear_backward(Tensor(), d_weight.cpu, d_bias.cpu, d_out.cpu, in.cpu, weight.cpu);
    ops::cuda::linear_backward(Tensor(), d_weight.gpu, d_bias.gpu, d_out.gpu, in.gpu, weight.gpu);
    const Tolerance sums = dtype == DType::f32 ? Tolerance{1e-4, 1e-3} : Tolerance{8e-3, 1e-2};
    expect_close(d_bias.gpu, d_bias.cpu, sums, "d_bias");
    expect_close(d_weight.gpu, d_weight.cpu, sums, "d_weight");
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaLinearTest, ::testing::Values(DType::f32, DType::bf16),
                         dtype_case_name);

}  // namespace
}  // namespace meshtrain::test
