// Counting the kernels' work (meshtrain/core/ops/op_counts.h): each call adds its products' FLOPs
// and its arguments' bytes under its op's name, the same on real and shape-only tensors, and only
// while the thread counts.
#include "meshtrain/core/ops/op_counts.h"

#include <gtest/gtest.h>

#include "meshtrain/core/ops/ops.h"
#include "meshtrain/core/tensor.h"

namespace meshtrain::ops {
namespace {

// out[M, N] = a[M, K] b[K, N]: 2 M N K FLOPs, 4 bytes per element of the three.
void matmul_5x3x7(Device device) {
  matmul(Tensor::zeros({5, 3}, DType::f32, device), Tensor::zeros({5, 7}, DType::f32, device),
         Tensor::zeros({7, 3}, DType::f32, device), false, false, 1.0f, 0.0f);
}

TEST(OpCounts, AMatmulCountsItsProductAndItsArgumentsBytes) {
  for (const Device device : {Device::cpu(), Device::meta()}) {
    OpCounts counts;
    {
      const OpCountScope counting(&counts);
      matmul_5x3x7(device);
      matmul_5x3x7(device);
    }
    const OpWork work = counts.by_op().at("matmul");
    EXPECT_EQ(work.calls, 2);
    EXPECT_DOUBLE_EQ(work.flops, 2 * (2.0 * 5 * 3 * 7));
    EXPECT_DOUBLE_EQ(work.bytes, 2 * (4.0 * (5 * 3 + 5 * 7 + 7 * 3)));
  }
}

TEST(OpCounts, ALinearBackwardCountsTheGradientsItForms) {
  const Tensor in = Tensor::zeros({6, 4}), weight = Tensor::zeros({4, 3}),
               d_out = Tensor::zeros({6, 3}), d_in = Tensor::zeros({6, 4}),
               d_weight = Tensor::zeros({4, 3});
  OpCounts counts;
  const OpCountScope counting(&counts);
  linear_backward(d_in, d_weight, Tensor(), d_out, in, weight);
  EXPECT_DOUBLE_EQ(counts.total().flops, 2 * (2.0 * 6 * 4 * 3));
  counts.clear();
  linear_backward(d_in, Tensor(), Tensor(), d_out, in, weight);  // a frozen weight
  EXPECT_DOUBLE_EQ(counts.total().flops, 2.0 * 6 * 4 * 3);
}

TEST(OpCounts, AttentionCountsItsFullSquareProducts) {
  // B=2 T=5 C=8 in 2 heads: each T x T product is 2 B T^2 C over the heads.
  const Tensor qkv = Tensor::zeros({2, 5, 24}, DType::f32, Device::meta());
  const Tensor out = Tensor::zeros({2, 5, 8}, DType::f32, Device::meta());
  OpCounts counts;
  const OpCountScope counting(&counts);
  attention_forward(out, qkv, 2);
  attention_backward(qkv, out, qkv, 2);
  const double product = 2.0 * 2 * 5 * 5 * 8;
  EXPECT_DOUBLE_EQ(counts.by_op().at("attention_forward").flops, 2 * product);
  EXPECT_DOUBLE_EQ(counts.by_op().at("attention_backward").flops, 5 * product);
}

TEST(OpCounts, BytesOnlyForKernelsWithoutProducts) {
  const Tensor x = Tensor::zeros({3, 4});
  OpCounts counts;
  const OpCountScope counting(&counts);
  add(x, x, x);
  EXPECT_DOUBLE_EQ(counts.by_op().at("add").flops, 0.0);
  EXPECT_DOUBLE_EQ(counts.by_op().at("add").bytes, 3 * 4.0 * 12);
}

TEST(OpCounts, AWindowCopyCountsTheWindowNotTheMatrices) {
  const Tensor in = Tensor::zeros({4, 10});
  const Tensor out = Tensor::zeros({4, 6}, DType::bf16);
  OpCounts counts;
  const OpCountScope counting(&counts);
  cast_columns(out, 1, in, 2, 5);
  EXPECT_EQ(counts.by_op().at("cast_columns").calls, 1);
  EXPECT_DOUBLE_EQ(counts.by_op().at("cast_columns").bytes, 4 * 5 * (4.0 + 2.0));
}

TEST(OpCounts, UnderTheSectionTheCodeNames) {
  OpCounts counts;
  const OpCountScope counting(&counts);
  matmul_5x3x7(Device::meta());
  {
    const OpCountSection forward("0F1");
    matmul_5x3x7(Device::meta());
    {
      const OpCountSection nested("0B1");
      matmul_5x3x7(Device::meta());
      matmul_5x3x7(Device::meta());
    }
    matmul_5x3x7(Device::meta());
  }
  const double one = 2.0 * 5 * 3 * 7;
  EXPECT_DOUBLE_EQ(counts.section_total("").flops, one);
  EXPECT_DOUBLE_EQ(counts.section_total("0F1").flops, 2 * one);
  EXPECT_DOUBLE_EQ(counts.section_total("0B1").flops, 2 * one);
  EXPECT_EQ(counts.section_total("1F1").calls, 0);
  EXPECT_EQ(counts.by_op().at("matmul").calls, 5);
  EXPECT_DOUBLE_EQ(counts.total().flops, 5 * one);
}

// Counts cleared while bound, inside a section they have counted into, count afresh (the thread
// keeps the bound counts' section map between kernels: clearing drops it).
TEST(OpCounts, ClearedWhileBoundCountAfresh) {
  OpCounts counts;
  const OpCountScope counting(&counts);
  const OpCountSection forward("0F0");
  matmul_5x3x7(Device::meta());
  counts.clear();
  matmul_5x3x7(Device::meta());
  EXPECT_EQ(counts.section_total("0F0").calls, 1);
  EXPECT_EQ(counts.by_op().at("matmul").calls, 1);
}

TEST(OpCounts, OnlyWhileTheThreadCountsAndIntoTheInnermostScope) {
  OpCounts outer, inner;
  matmul_5x3x7(Device::meta());  // nobody counts
  {
    const OpCountScope counting(&outer);
    {
      const OpCountScope nested(&inner);
      matmul_5x3x7(Device::meta());
    }
    matmul_5x3x7(Device::meta());
  }
  matmul_5x3x7(Device::meta());
  EXPECT_EQ(inner.total().calls, 1);
  EXPECT_EQ(outer.total().calls, 1);
  EXPECT_EQ(current_op_counts(), nullptr);
}

}  // namespace
}  // namespace meshtrain::ops
