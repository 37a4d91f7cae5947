// Causal multi-head attention forward and backward against the CPU kernel.
#include <cmath>
#include <ostream>
#include <tuple>
#include <vector>

#include "meshtrain/core/ops/cpu/cpu_ops.h"
#include "meshtrain/core/ops/cuda/cuda_ops.h"
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
// or several heads; and a longer one, where the per-sequence [H, T, T] scratch is reused for
// several sequences and each softmax row spans several warp strides.
const AttentionShape kShapes[] = {
    {2, 17, 48, 4}, {1, 70, 64, 1}, {3, 1, 24, 2}, {2, 33, 96, 3}, {2, 256, 128, 4}};

class CudaAttentionTest : public ::testing::TestWithParam<std::tuple<DType, AttentionShape>> {};

TEST_P(CudaAttentionTest, ForwardMatchesCpu) {
  MT_REQUIRE_GPU();
  const auto [dtype, s] = GetParam();
  const Operand qkv = random_operand({s.batch, s.seq, 3 * s.channels}, dtype, 1);
  const Operand out = random_operand({s.batch, s.seq, s.channels}, dtype, 5);  // overwritten
  ops::cpu::attention_forward(out.cpu, qkv.cpu, s.heads);
  ops::cuda::attention_forward(out.gpu, qkv.gpu, s.heads);
  // The scores come from identical inputs with f32 accumulation and the softmax is f32. With
  // bf16, out is P (rounded to bf16 for the GEMM, 2^-9) times V, rounded again.
  const Tolerance out_tol = dtype == DType::f32 ? Tolerance{1e-5, 1e-5} : Tolerance{1e-2, 4e-3};
  expect_close(out.gpu, out.cpu, out_tol, "out");
}

TEST_P(CudaAttentionTest, BackwardMatchesCpu) {
  MT_REQUIRE_GPU();
  const auto [dtype, s] = GetParam();
  const Operand qkv = random_operand({s.batch, s.seq, 3 * s.channels}, dtype, 2);
  const Operand d_out = random_operand({s.batch, s.seq, s.channels}, dtype, 3);
  const Operand d_qkv = random_operand({s.batch, s.seq, 3 * s.channels}, dtype, 4);  // overwritten
  // Both recompute the softmax from qkv: backward is checked on its own, with no forward first.
  ops::cpu::attention_backward(d_qkv.cpu, d_out.cpu, qkv.cpu, s.heads);
  ops::cuda::attention_backward(d_qkv.gpu, d_out.gpu, qkv.gpu, s.heads);
  // f32: GEMM order effects. bf16: P and dS are rounded to bf16 before their GEMMs (2^-9 each)
  // and d_qkv once more on output; gradients mix signs, so the absolute part scales with the
  // largest gradient.
  const double scale = max_abs(d_qkv.cpu);
  const Tolerance tol =
      dtype == DType::f32 ? Tolerance{1e-4, 1e-5 * scale} : Tolerance{1e-2, 1e-2 * scale};
  expect_close(d_qkv.gpu, d_qkv.cpu, tol, "d_qkv");
}

// The host copy's bytes, for bitwise comparison.
std::vector<unsigned char> bytes_of(const Tensor& t) {
  const Tensor host = t.to(Device::cpu());
  const auto* first = static_cast<const unsigned char*>(host.raw_data());
  return {first, first + host.nbytes()};
}

// Backward recomputes P from qkv, so a forward/backward pair run twice on the same inputs gives
// the same bits both times (also when the outputs start from different garbage).
TEST_P(CudaAttentionTest, RecomputeIsDeterministic) {
  MT_REQUIRE_GPU();
  const auto [dtype, s] = GetParam();
  const Operand qkv = random_operand({s.batch, s.seq, 3 * s.channels}, dtype, 6);
  const Operand d_out = random_operand({s.batch, s.seq, s.channels}, dtype, 7);
  std::vector<unsigned char> out_bytes[2], d_qkv_bytes[2];
  for (int run = 0; run < 2; ++run) {
    const Operand out = random_operand({s.batch, s.seq, s.channels}, dtype, 8 + run);
    const Operand d_qkv = random_operand({s.batch, s.seq, 3 * s.channels}, dtype, 10 + run);
    ops::cuda::attention_forward(out.gpu, qkv.gpu, s.heads);
    ops::cuda::attention_backward(d_qkv.gpu, d_out.gpu, qkv.gpu, s.heads);
    out_bytes[run] = bytes_of(out.gpu);
    d_qkv_bytes[run] = bytes_of(d_qkv.gpu);
    if (run == 0) {  // equal garbage would pass too: the gradients are at least finite
      for (float v : d_qkv.gpu.to_vector()) ASSERT_TRUE(std::isfinite(v));
    }
  }
  EXPECT_TRUE(out_bytes[0] == out_bytes[1]) << "out differs between identical runs";
  EXPECT_TRUE(d_qkv_bytes[0] == d_qkv_bytes[1]) << "d_qkv differs between identical runs";
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaAttentionTest,
                         ::testing::Combine(::testing::Values(DType::f32, DType::bf16),
                                            ::testing::ValuesIn(kShapes)));

}  // namespace
}  // namespace meshtrain::test
