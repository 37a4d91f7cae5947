// AdamW steps against the CPU kernel.
#include "meshtrain/core/ops/cpu/cpu_ops.h"
#include "meshtrain/core/ops/cuda/cuda_ops.h"
#include "tests/cuda/gpu_compare.h"

namespace meshtrain::test {
namespace {

TEST(CudaAdamW, StepsMatchCpu) {
  MT_REQUIRE_GPU();
  const Shape shape = {1031};
  const Operand param = random_operand(shape, DType::f32, 1);
  const Operand exp_avg = zeros_operand(shape, DType::f32);
  const Operand exp_avg_sq = zeros_operand(shape, DType::f32);
  ops::AdamWHyper hyper;
  hyper.lr = 1e-2f;
  hyper.weight_decay = 0.1f;
  for (int64_t step = 1; step <= 3; ++step) {
    const Operand grad = random_operand(shape, DType::f32, 10 + static_cast<uint32_t>(step));
    ops::cpu::adamw_step(param.cpu, grad.cpu, exp_avg.cpu, exp_avg_sq.cpu, hyper, step);
    ops::cuda::adamw_step(param.gpu, grad.gpu, exp_avg.gpu, exp_avg_sq.gpu, hyper, step);
    // The same f32 formula on both sides; the compiler may fuse multiply-adds differently, a
    // few ulp at most, compounded over three steps.
    expect_close(param.gpu, param.cpu, {1e-5, 1e-6}, "param");
    expect_close(exp_avg.gpu, exp_avg.cpu, {1e-5, 1e-7}, "exp_avg");
    expect_close(exp_avg_sq.gpu, exp_avg_sq.cpu, {1e-5, 1e-8}, "exp_avg_sq");
  }
}

}  // namespace
}  // namespace meshtrain::test
