// Causal multi-head attention forward and backward against the CPU kernel.
#include <ostream>
#include <tuple>

#include "core/ops/cpu/cpu_ops.h"
#include "core/ops/cuda/cuda_ops.h"
#include "tests/cuda/gpu_compare.h"

namespace meshtrain::test {
namespace {

struct AttentionShape {
  int64_t batch, seq, channels;
  int heads;
};
void PrintTo(const AttentionShape& s, std::ostream* os) {
  *os << "B" << s.batch << "_T" << s.seq << "_C" << s.channels << "_H" << s.heads;
}

// Sequences of 1, below and above a warp's 32 lanes (the softmax kernels stride over them), one
// or several heads.
const AttentionShape kShapes[] = {{2, 17, 48, 4}, {1, 70, 64, 1}, {3, 1, 24, 2}, {2, 33, 96, 3}};

class CudaAttentionTest : public ::testing::TestWithParam<std::tuple<DType, AttentionShape>> {};

TEST_P(CudaAttentionTest, ForwardMatchesCpu) {
  MT_REQUIRE_GPU();
  const auto [dtype, s] = GetParam();
  const Operand qkv = random_operand({s.batch, s.seq, 3 * s.channels}, dtype, 1);
  const Operand out = zeros_operand({s.batch, s.seq, s.channels}, dtype);
  const Operand probs = zeros_operand({s.batch, s.heads, s.seq, s.seq}, DType::f32);
  ops::cpu::attention_forward(out.cpu, probs.cpu, qkv.cpu, s.heads);
  ops::cuda::attention_forward(out.gpu, probs.gpu, qkv.gpu, s.heads);
  // probs is f32 and the scores come from identical inputs with f32 accumulation: tight for
  // both dtypes. With bf16, out is P (rounded to bf16 for the GEMM, 2^-9) times V, rounded again.
  expect_close(probs.gpu, probs.cpu, {1e-4, 1e-6}, "probs");
  const Tolerance out_tol = dtype == DType::f32 ? Tolerance{1e-5, 1e-5} : Tolerance{1e-2, 4e-3};
  expect_close(out.gpu, out.cpu, out_tol, "out");
}

TEST_P(CudaAttentionTest, BackwardMatchesCpu) {
  MT_REQUIRE_GPU();
  const auto [dtype, s] = GetParam();
  const Operand qkv = random_operand({s.batch, s.seq, 3 * s.channels}, dtype, 2);
  // The saved softmax comes from the CPU forward, so backward is checked on its own.
  const Operand out = zeros_operand({s.batch, s.seq, s.channels}, DType::f32);
  Tensor probs = Tensor::zeros({s.batch, s.heads, s.seq, s.seq});
  ops::cpu::attention_forward(out.cpu, probs, qkv.cpu, s.heads);
  const Operand saved_probs = same_on_both(probs);

  const Operand d_out = random_operand({s.batch, s.seq, s.channels}, dtype, 3);
  const Operand d_qkv = random_operand({s.batch, s.seq, 3 * s.channels}, dtype, 4);  // overwritten
  ops::cpu::attention_backward(d_qkv.cpu, d_out.cpu, qkv.cpu, saved_probs.cpu, s.heads);
  ops::cuda::attention_backward(d_qkv.gpu, d_out.gpu, qkv.gpu, saved_probs.gpu, s.heads);
  // f32: GEMM order effects. bf16: P and dS are rounded to bf16 before their GEMMs (2^-9 each)
  // and d_qkv once more on output; gradients mix signs, so the absolute part scales with the
  // largest gradient.
  const double scale = max_abs(d_qkv.cpu);
  const Tolerance tol =
      dtype == DType::f32 ? Tolerance{1e-4, 1e-5 * scale} : Tolerance{1e-2, 1e-2 * scale};
  expect_close(d_qkv.gpu, d_qkv.cpu, tol, "d_qkv");
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaAttentionTest,
                         ::testing::Combine(::testing::Values(DType::f32, DType::bf16),
                                            ::testing::ValuesIn(kShapes)));

}  // namespace
}  // namespace meshtrain::test
