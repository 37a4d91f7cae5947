// Vocabulary-parallel softmax cross-entropy (row maximum, partial sums, backward) against the CPU
// kernels, on the whole vocabulary and on a slice in its middle.
#include <random>
#include <string>
#include <tuple>

#include "meshtrain/core/ops/cpu/cpu_ops.h"
#include "meshtrain/core/ops/cuda/cuda_ops.h"
#include "tests/cuda/gpu_compare.h"

namespace meshtrain::test {
namespace {

// Targets anywhere in a vocabulary three times the slice's width, so that about a third of them
// fall inside a slice starting at 0 or at `vocab`.
Operand random_targets(int64_t rows, int64_t vocab, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int32_t> dist(0, static_cast<int32_t>(3 * vocab - 1));
  std::vector<int32_t> targets(static_cast<size_t>(rows));
  for (int32_t& t : targets) t = dist(gen);
  return same_on_both(Tensor::from_vector(targets, {rows}));
}

// (dtype, slice width V, slice starts at 0 or at V). V: smaller than a block, and GPT-2's
// vocabulary, whose rows span many strides of the block.
class CudaCrossEntropyTest : public ::testing::TestWithParam<std::tuple<DType, int64_t, bool>> {};

TEST_P(CudaCrossEntropyTest, MatchesCpu) {
  MT_REQUIRE_GPU();
  const auto [dtype, vocab, middle] = GetParam();
  const int64_t rows = 10, vocab_start = middle ? vocab : 0;
  const Operand logits = random_operand({2, 5, vocab}, dtype, 1, -4.0f, 4.0f);
  const Operand targets = random_targets(rows, vocab, 2);

  const Operand row_max = zeros_operand({rows}, DType::f32);
  ops::cpu::cross_entropy_row_max(row_max.cpu, logits.cpu);
  ops::cuda::cross_entropy_row_max(row_max.gpu, logits.gpu);
  expect_close(row_max.gpu, row_max.cpu, {0.0, 0.0}, "row_max");  // a maximum: exact

  // Another slice's larger maximum, as the all-reduce would hand it to both kernels.
  std::vector<float> max_values = row_max.cpu.to_vector();
  for (float& m : max_values) m += 1.5f;
  const Operand global_max = same_on_both(Tensor::from_vector(max_values, {rows}));
  const Operand sum_exp = zeros_operand({rows}, DType::f32);
  const Operand target_logit = zeros_operand({rows}, DType::f32);
  ops::cpu::cross_entropy_partials(sum_exp.cpu, target_logit.cpu, logits.cpu, targets.cpu,
                                   global_max.cpu, vocab_start);
  ops::cuda::cross_entropy_partials(sum_exp.gpu, target_logit.gpu, logits.gpu, targets.gpu,
                                    global_max.gpu, vocab_start);
  // f32 sums from identical inputs for both dtypes: only the order of the 50k-term sum and expf
  // versus std::exp differ. The CPU's sequential sum drifts by ~1e-5 relative over 50k terms.
  // The picked logit is a copy.
  expect_close(sum_exp.gpu, sum_exp.cpu, {1e-4, 0.0}, "sum_exp");
  expect_close(target_logit.gpu, target_logit.cpu, {0.0, 0.0}, "target_logit");

  // Backward on both sides takes the CPU's sum_exp, so that only the kernel itself is compared.
  const float scale = 1.0f / static_cast<float>(rows);
  const Operand d_logits = random_operand({2, 5, vocab}, dtype, 3);  // overwritten
  ops::cpu::cross_entropy_backward(d_logits.cpu, logits.cpu, targets.cpu, global_max.cpu,
                                   sum_exp.cpu, vocab_start, scale);
  ops::cuda::cross_entropy_backward(d_logits.gpu, logits.gpu, targets.gpu, global_max.gpu,
                                    sum_exp.cpu.to(gpu()), vocab_start, scale);
  // The gradients are tiny (probabilities of ~1/V): a relative bound. bf16 rounds each once.
  const Tolerance tol = dtype == DType::f32 ? Tolerance{1e-4, 1e-9} : Tolerance{8e-3, 1e-9};
  expect_close(d_logits.gpu, d_logits.cpu, tol, "d_logits");
}

// "bf16_V50257_middle_slice" in test output.
std::string case_name(const ::testing::TestParamInfo<CudaCrossEntropyTest::ParamType>& info) {
  const auto [dtype, vocab, middle] = info.param;
  return std::string(dtype_name(dtype)) + "_V" + std::to_string(vocab) +
         (middle ? "_middle_slice" : "_first_slice");
}

INSTANTIATE_TEST_SUITE_P(Vocabularies, CudaCrossEntropyTest,
                         ::testing::Combine(::testing::Values(DType::f32, DType::bf16),
                                            ::testing::Values(int64_t{7}, int64_t{50257}),
                                            ::testing::Bool()),
                         case_name);

}  // namespace
}  // namespace meshtrain::test
