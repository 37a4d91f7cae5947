// Embedding gather and scatter-add against the CPU kernel, with repeated ids, on the whole
// vocabulary and on a slice in its middle, with ids both inside and outside the table's rows.
#include <random>
#include <string>
#include <tuple>

#include "meshtrain/core/ops/cpu/cpu_ops.h"
#include "meshtrain/core/ops/cuda/cuda_ops.h"
#include "tests/cuda/gpu_compare.h"

namespace meshtrain::test {
namespace {

// A table of 50 rows in a vocabulary of 100 ids.
constexpr int64_t kVocab = 50, kChannels = 40, kIds = 100;

// 90 ids out of 100: the table's rows are hit about once each, and id 37 (inside both slices
// below) many more times.
Operand random_ids(uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int32_t> dist(0, kIds - 1);
  std::vector<int32_t> ids(90);
  for (int32_t& id : ids) id = dist(gen) % 8 == 0 ? 37 : dist(gen);
  return same_on_both(Tensor::from_vector(ids, {3, 30}));
}

// (dtype, vocab_start): the first half of the vocabulary, or rows [30, 80) of it.
class CudaEmbeddingTest : public ::testing::TestWithParam<std::tuple<DType, int64_t>> {};

TEST_P(CudaEmbeddingTest, ForwardCopiesRows) {
  MT_REQUIRE_GPU();
  const auto [dtype, vocab_start] = GetParam();
  const Operand ids = random_ids(1);
  const Operand table = random_operand({kVocab, kChannels}, dtype, 2);
  const Operand out = random_operand({3, 30, kChannels}, dtype, 6);  // overwritten
  ops::cpu::embedding_forward(out.cpu, ids.cpu, table.cpu, vocab_start);
  ops::cuda::embedding_forward(out.gpu, ids.gpu, table.gpu, vocab_start);
  expect_close(out.gpu, out.cpu, {0.0, 0.0}, "out");  // copies and zeros: exact
}

TEST_P(CudaEmbeddingTest, BackwardAccumulatesRows) {
  MT_REQUIRE_GPU();
  const auto [dtype, vocab_start] = GetParam();
  const Operand ids = random_ids(3);
  const Operand d_out = random_operand({3, 30, kChannels}, dtype, 4);
  const Operand d_table = random_operand({kVocab, kChannels}, dtype, 5);  // accumulates
  ops::cpu::embedding_backward(d_table.cpu, d_out.cpu, ids.cpu, vocab_start);
  ops::cuda::embedding_backward(d_table.gpu, d_out.gpu, ids.gpu, vocab_start);
  // Atomics add in any order. f32: order effects only. bf16: every add rounds to bf16, and the
  // hot row takes ~15 adds of values ~1, so its error reaches ~15 * 2^-9 * |partial sum|.
  const Tolerance tol = dtype == DType::f32 ? Tolerance{1e-5, 1e-5} : Tolerance{2e-2, 6e-2};
  expect_close(d_table.gpu, d_table.cpu, tol, "d_table");
}

// "bf16_from_30" in test output.
std::string case_name(const ::testing::TestParamInfo<CudaEmbeddingTest::ParamType>& info) {
  const auto [dtype, vocab_start] = info.param;
  return std::string(dtype_name(dtype)) + "_from_" + std::to_string(vocab_start);
}

INSTANTIATE_TEST_SUITE_P(Slices, CudaEmbeddingTest,
                         ::testing::Combine(::testing::Values(DType::f32, DType::bf16),
                                            ::testing::Values(int64_t{0}, int64_t{30})),
                         case_name);

}  // namespace
}  // namespace meshtrain::test
