// add, axpy, scale, sum_squares, cast and cast_columns against the CPU kernels (casts also bit
// for bit).
#include <cmath>
#include <cstring>
#include <limits>

#include "meshtrain/core/ops/cpu/cpu_ops.h"
#include "meshtrain/core/ops/cuda/cuda_ops.h"
#include "tests/cuda/gpu_compare.h"

namespace meshtrain::test {
namespace {

constexpr int64_t kCount = 10007;  // not a multiple of the block size

// f32: one operation per element, at most an FMA's worth of difference. bf16: the f32 result is
// rounded once to bf16 (2^-9 relative).
Tolerance elementwise_tolerance(DType dtype) {
  return dtype == DType::f32 ? Tolerance{1e-6, 1e-7} : Tolerance{4e-3, 1e-7};
}

class CudaElementwiseTest : public ::testing::TestWithParam<DType> {};

TEST_P(CudaElementwiseTest, AddAxpyScaleMatchCpu) {
  MT_REQUIRE_GPU();
  const DType dtype = GetParam();
  const Operand a = random_operand({kCount}, dtype, 1);
  const Operand b = random_operand({kCount}, dtype, 2);
  const Operand out = zeros_operand({kCount}, dtype);
  ops::cpu::add(out.cpu, a.cpu, b.cpu);
  ops::cuda::add(out.gpu, a.gpu, b.gpu);
  expect_close(out.gpu, out.cpu, elementwise_tolerance(dtype), "add");

  const Operand y = random_operand({kCount}, dtype, 3);
  ops::cpu::axpy(y.cpu, -0.75f, a.cpu);
  ops::cuda::axpy(y.gpu, -0.75f, a.gpu);
  expect_close(y.gpu, y.cpu, elementwise_tolerance(dtype), "axpy");

  const Operand x = random_operand({kCount}, dtype, 4);
  ops::cpu::scale(x.cpu, 3.0f);
  ops::cuda::scale(x.gpu, 3.0f);
  expect_close(x.gpu, x.cpu, elementwise_tolerance(dtype), "scale");
}

TEST_P(CudaElementwiseTest, SumSquaresMatchesCpu) {
  MT_REQUIRE_GPU();
  const DType dtype = GetParam();
  // More elements than the reduction's blocks and threads cover in one stride.
  const Operand x = random_operand({(1 << 20) + 3}, dtype, 5);
  const double expected = ops::cpu::sum_squares({x.cpu});
  // Squares of f32 values are exact in double; only the order of the double sum differs.
  EXPECT_NEAR(ops::cuda::sum_squares({x.gpu}), expected, 1e-10 * expected);
  EXPECT_EQ(ops::cuda::sum_squares({zeros_operand({0}, dtype).gpu}), 0.0);
  EXPECT_EQ(ops::cuda::sum_squares({}), 0.0);
  // Many tensors, small and large and empty, in one call: as the gradient norm asks.
  const Operand small = random_operand({37}, dtype, 6);
  const Operand empty = zeros_operand({0}, dtype);
  const double all = ops::cpu::sum_squares({x.cpu, small.cpu, empty.cpu, small.cpu});
  EXPECT_NEAR(ops::cuda::sum_squares({x.gpu, small.gpu, empty.gpu, small.gpu}), all, 1e-10 * all);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaElementwiseTest, ::testing::Values(DType::f32, DType::bf16),
                         dtype_case_name);

float from_bits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Rounding to bf16 must match the host's round-to-nearest-even bit for bit: ties both ways,
// values that round up into the next binade and to infinity, subnormals, signed zeros.
TEST(CudaCast, F32ToBf16MatchesHostRoundingBitForBit) {
  MT_REQUIRE_GPU();
  std::vector<float> values = {0.0f,
                               -0.0f,
                               1.0f,
                               from_bits(0x3f808000u),             // tie, even below: rounds down
                               from_bits(0x3f818000u),             // tie, odd below: rounds up
                               from_bits(0x3f808001u),             // just above a tie
                               from_bits(0x3fffffffu),             // rounds up into the next binade
                               std::numeric_limits<float>::max(),  // rounds to infinity
                               std::numeric_limits<float>::infinity(),
                               -std::numeric_limits<float>::infinity(),
                               std::numeric_limits<float>::denorm_min(),
                               from_bits(0x00018000u),  // subnormal tie
                               -3.1415926f,
                               std::numeric_limits<float>::quiet_NaN()};
  const Operand random = random_operand({1000}, DType::f32, 6, -1e4f, 1e4f);
  for (float v : random.cpu.to_vector()) values.push_back(v);
  const Tensor in = Tensor::from_vector(values, {static_cast<int64_t>(values.size())});
  Tensor out = Tensor::empty(in.shape(), DType::bf16, gpu());
  ops::cuda::cast(out, in.to(gpu()));
  const Tensor host_out = out.to(Device::cpu());
  for (size_t i = 0; i < values.size(); ++i) {
    const BF16 got = host_out.data<BF16>()[i];
    if (std::isnan(values[i])) {
      EXPECT_TRUE(std::isnan(to_f32(got))) << "NaN stays NaN";
    } else {
      EXPECT_EQ(got.bits, to_bf16(values[i]).bits) << "value " << values[i] << " at " << i;
    }
  }
}

TEST(CudaCast, Bf16ToF32AndSameDtypeCopiesAreExact) {
  MT_REQUIRE_GPU();
  const Operand low = random_operand({kCount}, DType::bf16, 7);
  const Operand wide = zeros_operand({kCount}, DType::f32);
  ops::cuda::cast(wide.gpu, low.gpu);
  expect_close(wide.gpu, low.cpu, {0.0, 0.0}, "bf16 -> f32");

  for (DType dtype : {DType::f32, DType::bf16}) {
    const Operand src = random_operand({kCount}, dtype, 8);
    const Operand dst = zeros_operand({kCount}, dtype);
    ops::cuda::cast(dst.gpu, src.gpu);
    expect_close(dst.gpu, src.cpu, {0.0, 0.0}, "copy");
  }
  const Tensor ids = Tensor::from_vector(std::vector<int32_t>{5, -1, 1 << 30}, {3});
  Tensor ids_copy = Tensor::zeros({3}, DType::i32, gpu());
  ops::cuda::cast(ids_copy, ids.to(gpu()));
  EXPECT_EQ(ids_copy.to_vector(), ids.to_vector());
}

// Every dtype pair over a window of columns, bit for bit with the CPU kernel, the rest of out
// untouched (the same-dtype pairs are one 2D copy, the others a kernel).
TEST(CudaCast, ColumnWindowsMatchTheCpuBitForBit) {
  MT_REQUIRE_GPU();
  const int64_t rows = 37, in_cols = 1031, out_cols = 517, cols = 509;
  for (DType in_dtype : {DType::f32, DType::bf16})
    for (DType out_dtype : {DType::f32, DType::bf16}) {
      const Operand in = random_operand({rows, in_cols}, in_dtype, 9);
      const Operand out = random_operand({rows, out_cols}, out_dtype, 10);
      ops::cuda::cast_columns(out.gpu, 5, in.gpu, 300, cols);
      ops::cpu::cast_columns(out.cpu, 5, in.cpu, 300, cols);
      expect_close(out.gpu, out.cpu, {0.0, 0.0}, "cast_columns");
    }
}

}  // namespace
}  // namespace meshtrain::test
