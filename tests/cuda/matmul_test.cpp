// matmul on cuBLAS against the CPU kernel, for every transpose combination and both dtypes.
#include <exception>
#include <string>
#include <thread>
#include <tuple>

#include "meshtrain/core/ops/cpu/cpu_ops.h"
#include "meshtrain/core/ops/cuda/cuda_ops.h"
#include "tests/cuda/gpu_compare.h"

namespace meshtrain::test {
namespace {

// f32: the same products summed in another order, ~1e-7 relative per term. bf16: the inputs are
// identical and cuBLAS accumulates in f32, so the only real error is the single rounding of the
// output to bf16 (at most 2^-9 relative); 8e-3 leaves room.
Tolerance matmul_tolerance(DType dtype) {
  return dtype == DType::f32 ? Tolerance{1e-5, 1e-5} : Tolerance{8e-3, 1e-3};
}

class CudaMatmulTest : public ::testing::TestWithParam<std::tuple<DType, bool, bool>> {};

TEST_P(CudaMatmulTest, MatchesCpu) {
  MT_REQUIRE_GPU();
  const auto [dtype, trans_a, trans_b] = GetParam();
  const int64_t m = 37, n = 53, k = 29;
  const Operand a = random_operand(trans_a ? Shape{k, m} : Shape{m, k}, dtype, 1);
  const Operand b = random_operand(trans_b ? Shape{n, k} : Shape{k, n}, dtype, 2);
  const Operand out = random_operand({m, n}, dtype, 3);
  ops::cpu::matmul(out.cpu, a.cpu, b.cpu, trans_a, trans_b, 0.5f, 0.25f);
  ops::cuda::matmul(out.gpu, a.gpu, b.gpu, trans_a, trans_b, 0.5f, 0.25f);
  expect_close(out.gpu, out.cpu, matmul_tolerance(dtype), "out");
}

INSTANTIATE_TEST_SUITE_P(AllTransposes, CudaMatmulTest,
                         ::testing::Combine(::testing::Values(DType::f32, DType::bf16),
                                            ::testing::Bool(), ::testing::Bool()));

TEST(CudaMatmul, LongReductionMatchesCpu) {
  MT_REQUIRE_GPU();
  for (DType dtype : {DType::f32, DType::bf16}) {
    const Operand a = random_operand({64, 768}, dtype, 4);
    const Operand b = random_operand({768, 96}, dtype, 5);
    const Operand out = zeros_operand({64, 96}, dtype);
    ops::cpu::matmul(out.cpu, a.cpu, b.cpu, false, false, 1.0f, 0.0f);
    ops::cuda::matmul(out.gpu, a.gpu, b.gpu, false, false, 1.0f, 0.0f);
    // Sums of 768 terms of size ~0.3: f32 order effects reach ~1e-5 absolute.
    const Tolerance tol = dtype == DType::f32 ? Tolerance{1e-5, 5e-5} : Tolerance{8e-3, 1e-3};
    expect_close(out.gpu, out.cpu, tol, "out");
  }
}

TEST(CudaMatmul, EmptyReductionScalesByBeta) {
  MT_REQUIRE_GPU();
  const Operand a = zeros_operand({4, 0}, DType::f32);
  const Operand b = zeros_operand({0, 6}, DType::f32);
  const Operand out = random_operand({4, 6}, DType::f32, 6);
  ops::cuda::matmul(out.gpu, a.gpu, b.gpu, false, false, 1.0f, 0.5f);
  ops::cpu::scale(out.cpu, 0.5f);
  expect_close(out.gpu, out.cpu, {0.0, 0.0}, "out = beta * out");
}

// Each thread has its own stream and cuBLAS handle: concurrent GEMMs must not interfere.
TEST(CudaMatmul, ConcurrentThreads) {
  MT_REQUIRE_GPU();
  const Operand a = random_operand({96, 80}, DType::f32, 7);
  const Operand b = random_operand({80, 112}, DType::f32, 8);
  Tensor expected = Tensor::zeros({96, 112});
  ops::cpu::matmul(expected, a.cpu, b.cpu, false, false, 1.0f, 0.0f);
  std::vector<Tensor> results(4);
  std::vector<std::string> errors(results.size());
  std::vector<std::thread> threads;
  for (size_t t = 0; t < results.size(); ++t) {
    threads.emplace_back([&, t] {
      try {
        results[t] = Tensor::zeros({96, 112}, DType::f32, gpu());
        for (int repeat = 0; repeat < 20; ++repeat)
          ops::cuda::matmul(results[t], a.gpu, b.gpu, false, false, 1.0f, 0.0f);
        device_synchronize(gpu());
      } catch (const std::exception& e) {
        errors[t] = e.what();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (size_t t = 0; t < results.size(); ++t) {
    ASSERT_EQ(errors[t], "") << "thread " << t;
    expect_close(results[t], expected, {1e-5, 1e-5}, "out");
  }
}

}  // namespace
}  // namespace meshtrain::test
