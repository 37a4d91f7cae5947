// Embedding gather and scatter-add against the CPU kernel, with repeated ids.
#include <random>

#include "core/ops/cpu/cpu_ops.h"
#include "core/ops/cuda/cuda_ops.h"
#include "tests/cuda/gpu_compare.h"

namespace meshtrain::test {
namespace {

constexpr int64_t kVocab = 50, kChannels = 40;

// 90 ids out of 50: every row of the table is hit about twice, some many more times.
Operand random_ids(uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int32_t> dist(0, kVocab - 1);
  std::vector<int32_t> ids(90);
  for (int32_t& id : ids) id = dist(gen) % 8 == 0 ? 7 : dist(gen);  // id 7 is hot
  return same_on_both(Tensor::from_vector(ids, {3, 30}));
}

class CudaEmbeddingTest : public ::testing::TestWithParam<DType> {};

TEST_P(CudaEmbeddingTest, ForwardCopiesRows) {
  MT_REQUIRE_GPU();
  const DType dtype = GetParam();
  const Operand ids = random_ids(1);
  const Operand table = random_operand({kVocab, kChannels}, dtype, 2);
  const Operand out = zeros_operand({3, 30, kChannels}, dtype);
  ops::cpu::embedding_forward(out.cpu, ids.cpu, table.cpu);
  ops::cuda::embedding_forward(out.gpu, ids.gpu, table.gpu);
  expect_close(out.gpu, out.cpu, {0.0, 0.0}, "out");  // a copy: exact
}

TEST_P(CudaEmbeddingTest, BackwardAccumulatesRows) {
  MT_REQUIRE_GPU();
  const DType dtype = GetParam();
  const Operand ids = random_ids(3);
  const Operand d_out = random_operand({3, 30, kChannels}, dtype, 4);
  const Operand d_table = random_operand({kVocab, kChannels}, dtype, 5);  // accumulates
  ops::cpu::embedding_backward(d_table.cpu, d_out.cpu, ids.cpu);
  ops::cuda::embedding_backward(d_table.gpu, d_out.gpu, ids.gpu);
  // Atomics add in any order. f32: order effects only. bf16: every add rounds to bf16, and the
  // hot row takes ~15 adds of values ~1, so its error reaches ~15 * 2^-9 * |partial sum|.
  const Tolerance tol = dtype == DType::f32 ? Tolerance{1e-5, 1e-5} : Tolerance{2e-2, 6e-2};
  expect_close(d_table.gpu, d_table.cpu, tol, "d_table");
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaEmbeddingTest, ::testing::Values(DType::f32, DType::bf16),
                         dtype_case_name);

}  // namespace
}  // namespace meshtrain::test
