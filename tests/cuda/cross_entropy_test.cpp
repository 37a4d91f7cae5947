// Softmax cross-entropy forward and backward against the CPU kernel.
#include <cmath>
#include <random>
#include <tuple>

#include "core/ops/cpu/cpu_ops.h"
#include "core/ops/cuda/cuda_ops.h"
#include "tests/cuda/gpu_compare.h"

namespace meshtrain::test {
namespace {

Operand random_targets(int64_t rows, int64_t vocab, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int32_t> dist(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> targets(static_cast<size_t>(rows));
  for (int32_t& t : targets) t = dist(gen);
  return same_on_both(Tensor::from_vector(targets, {rows}));
}

// A vocabulary smaller than a block and GPT-2's, whose rows span many strides of the block.
class CudaCrossEntropyTest : public ::testing::TestWithParam<std::tuple<DType, int64_t>> {};

TEST_P(CudaCrossEntropyTest, MatchesCpu) {
  MT_REQUIRE_GPU();
  const auto [dtype, vocab] = GetParam();
  const int64_t rows = 10;
  const Operand logits = random_operand({2, 5, vocab}, dtype, 1, -4.0f, 4.0f);
  const Operand targets = random_targets(rows, vocab, 2);
  const Operand losses = zeros_operand({rows}, DType::f32);
  ops::cpu::cross_entropy_forward(losses.cpu, logits.cpu, targets.cpu);
  ops::cuda::cross_entropy_forward(losses.gpu, logits.gpu, targets.gpu);
  // Losses are f32 from identical inputs for both dtypes: only the order of the 50k-term sum
  // and expf/logf versus std::exp/std::log differ.
  expect_close(losses.gpu, losses.cpu, {1e-5, 1e-5}, "losses");

  const float scale = 1.0f / static_cast<float>(rows);
  const Operand d_logits = random_operand({2, 5, vocab}, dtype, 3);  // overwritten
  ops::cpu::cross_entropy_backward(d_logits.cpu, logits.cpu, targets.cpu, scale);
  ops::cuda::cross_entropy_backward(d_logits.gpu, logits.gpu, targets.gpu, scale);
  // The gradients are tiny (probabilities of ~1/V): a relative bound. bf16 rounds each once.
  const Tolerance tol = dtype == DType::f32 ? Tolerance{1e-4, 1e-9} : Tolerance{8e-3, 1e-9};
  expect_close(d_logits.gpu, d_logits.cpu, tol, "d_logits");
}

INSTANTIATE_TEST_SUITE_P(Vocabularies, CudaCrossEntropyTest,
                         ::testing::Combine(::testing::Values(DType::f32, DType::bf16),
                                            ::testing::Values(int64_t{7}, int64_t{50257})));

// The device cannot throw: a target outside the vocabulary turns its row into NaN instead of
// reading out of bounds.
TEST(CudaCrossEntropy, TargetOutsideVocabularyGivesNaN) {
  MT_REQUIRE_GPU();
  const Operand logits = random_operand({2, 9}, DType::f32, 4);
  const Operand targets = same_on_both(Tensor::from_vector(std::vector<int32_t>{3, 9}, {2}));
  const Operand losses = zeros_operand({2}, DType::f32);
  ops::cuda::cross_entropy_forward(losses.gpu, logits.gpu, targets.gpu);
  const std::vector<float> values = losses.gpu.to_vector();
  EXPECT_TRUE(std::isfinite(values[0]));
  EXPECT_TRUE(std::isnan(values[1]));
}

}  // namespace
}  // namespace meshtrain::test
