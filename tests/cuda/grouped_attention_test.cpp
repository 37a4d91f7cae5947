// Grouped-query causal attention forward and backward against the CPU kernel.
#include <cmath>
#include <ostream>
#include <tuple>
#include <vector>

#include "meshtrain/core/ops/cpu/cpu_ops.h"
#include "meshtrain/core/ops/cuda/cuda_ops.h"
#include "tests/cuda/gpu_compare.h"

namespace meshtrain::test {
namespace {

struct GroupedShape {
  int64_t batch, seq;
  int heads, kv_heads;
  int64_t head_dim;
};
void PrintTo(const GroupedShape& s, std::ostream* os) {
  *os << "B" << s.batch << "_T" << s.seq << "_H" << s.heads << "_KV" << s.kv_heads << "_hd"
      << s.head_dim;
}

// Groups of 1 (the packed op's case), 2, 3, 4 and 8 query heads per key/value head; sequences of 1,
// below and above a warp's 32 lanes, and a longer one whose [H, T, T] scratch serves several
// sequences.
const GroupedShape kShapes[] = {
    {2, 17, 4, 2, 8}, {1, 70, 8, 1, 16}, {3, 1, 4, 4, 6}, {2, 33, 6, 2, 16}, {2, 256, 8, 2, 32}};

class CudaGroupedAttentionTest : public ::testing::TestWithParam<std::tuple<DType, GroupedShape>> {
};

struct Operands {
  Operand q, k, v;
};
Operands random_operands(const GroupedShape& s, DType dtype, uint32_t seed) {
  return {random_operand({s.batch, s.seq, s.heads * s.head_dim}, dtype, seed),
          random_operand({s.batch, s.seq, s.kv_heads * s.head_dim}, dtype, seed + 1),
          random_operand({s.batch, s.seq, s.kv_heads * s.head_dim}, dtype, seed + 2)};
}

TEST_P(CudaGroupedAttentionTest, ForwardMatchesCpu) {
  MT_REQUIRE_GPU();
  const auto [dtype, s] = GetParam();
  const Operands in = random_operands(s, dtype, 1);
  const Operand out = random_operand(in.q.cpu.shape(), dtype, 5);  // overwritten
  ops::cpu::grouped_attention_forward(out.cpu, in.q.cpu, in.k.cpu, in.v.cpu, s.heads, s.kv_heads);
  ops::cuda::grouped_attention_forward(out.gpu, in.q.gpu, in.k.gpu, in.v.gpu, s.heads, s.kv_heads);
  // As for the packed op: f32 scores and softmax from identical inputs; with bf16, P is rounded
  // for the GEMM (2^-9) and out once more.
  const Tolerance tol = dtype == DType::f32 ? Tolerance{1e-5, 1e-5} : Tolerance{1e-2, 4e-3};
  expect_close(out.gpu, out.cpu, tol, "out");
}

TEST_P(CudaGroupedAttentionTest, BackwardMatchesCpu) {
  MT_REQUIRE_GPU();
  const auto [dtype, s] = GetParam();
  const Operands in = random_operands(s, dtype, 6);
  const Operand d_out = random_operand(in.q.cpu.shape(), dtype, 9);
  // Overwritten, not accumulated: they start from garbage.
  const Operand d_q = random_operand(in.q.cpu.shape(), dtype, 10);
  const Operand d_k = random_operand(in.k.cpu.shape(), dtype, 11);
  const Operand d_v = random_operand(in.v.cpu.shape(), dtype, 12);
  ops::cpu::grouped_attention_backward(d_q.cpu, d_k.cpu, d_v.cpu, d_out.cpu, in.q.cpu, in.k.cpu,
                                       in.v.cpu, s.heads, s.kv_heads);
  ops::cuda::grouped_attention_backward(d_q.gpu, d_k.gpu, d_v.gpu, d_out.gpu, in.q.gpu, in.k.gpu,
                                        in.v.gpu, s.heads, s.kv_heads);
  // f32: GEMM order effects. bf16: P and dS are rounded to bf16 before their GEMMs (2^-9 each),
  // each gradient once more on output, and dK / dV once per query head of the group as the GPU
  // adds the group's passes in bf16 (the CPU sums in f32): the absolute part scales with the
  // largest gradient and, for dK / dV, with the group.
  const int64_t group = s.heads / s.kv_heads;
  const auto tolerance = [&](const Tensor& expected, int64_t passes) {
    const double scale = max_abs(expected);
    return dtype == DType::f32
               ? Tolerance{1e-4, 1e-5 * scale}
               : Tolerance{1e-2, 1e-2 * scale * std::sqrt(static_cast<double>(passes))};
  };
  expect_close(d_q.gpu, d_q.cpu, tolerance(d_q.cpu, 1), "d_q");
  expect_close(d_k.gpu, d_k.cpu, tolerance(d_k.cpu, group), "d_k");
  expect_close(d_v.gpu, d_v.cpu, tolerance(d_v.cpu, group), "d_v");
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaGroupedAttentionTest,
                         ::testing::Combine(::testing::Values(DType::f32, DType::bf16),
                                            ::testing::ValuesIn(kShapes)));

}  // namespace
}  // namespace meshtrain::test
