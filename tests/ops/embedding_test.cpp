// Embedding lookup and its scatter-add backward, with repeated ids, in closed form.
#include <gtest/gtest.h>

#include "core/error.h"
#include "core/ops/ops.h"
#include "tests/ops/expect_error.h"
#include "tests/ops/test_tensors.h"

namespace meshtrain {
namespace {

constexpr int64_t kV = 5, kC = 3;

// table[v][c] = 10 v + c, so every row is recognisable.
Tensor numbered_table() {
  std::vector<float> values;
  for (int64_t v = 0; v < kV; ++v)
    for (int64_t c = 0; c < kC; ++c) values.push_back(static_cast<float>(10 * v + c));
  return Tensor::from_vector(values, {kV, kC});
}

TEST(OpsEmbedding, ForwardCopiesTheRowsOfTheIds) {
  const Tensor ids = Tensor::from_vector(std::vector<int32_t>{0, 3, 3, 4}, {2, 2});
  const Tensor out = Tensor::empty({2, 2, kC});
  ops::embedding_forward(out, ids, numbered_table());
  EXPECT_EQ(out.to_vector(), (std::vector<float>{0, 1, 2, 30, 31, 32, 30, 31, 32, 40, 41, 42}));
}

TEST(OpsEmbedding, BackwardAddsEveryOccurrence) {
  const Tensor ids = Tensor::from_vector(std::vector<int32_t>{0, 3, 3, 4}, {4});
  const Tensor d_out = Tensor::from_vector(
      std::vector<float>{1, 2, 3, 10, 20, 30, 100, 200, 300, -1, -2, -3}, {4, kC});
  const Tensor d_table = Tensor::from_vector(std::vector<float>(kV * kC, 0.5f), {kV, kC});
  ops::embedding_backward(d_table, d_out, ids);
  EXPECT_EQ(d_table.to_vector(), (std::vector<float>{1.5f, 2.5f, 3.5f,        // id 0
                                                     0.5f, 0.5f, 0.5f,        // unused
                                                     0.5f, 0.5f, 0.5f,        // unused
                                                     110.5f, 220.5f, 330.5f,  // id 3 twice
                                                     -0.5f, -1.5f, -2.5f}));  // id 4
}

TEST(OpsEmbeddingValidation, IdsOutOfRangeAndWrongDtype) {
  const Tensor out = Tensor::empty({2, kC});
  test::expect_error<InvalidArgument>(
      [&] {
        ops::embedding_forward(out, Tensor::from_vector(std::vector<int32_t>{1, 5}, {2}),
                               numbered_table());
      },
      "embedding_forward: ids[1] = 5 is outside the table's [0, 5)");
  test::expect_error<InvalidArgument>(
      [&] {
        ops::embedding_backward(Tensor::zeros({kV, kC}), Tensor::zeros({2, kC}),
                                Tensor::from_vector(std::vector<int32_t>{-1, 0}, {2}));
      },
      "embedding_backward: ids[0] = -1 is outside the table's [0, 5)");
  test::expect_error<InvalidArgument>(
      [&] { ops::embedding_forward(out, Tensor::empty({2}), numbered_table()); },
      "embedding_forward: ids must be i32, got f32[2] on cpu");
  test::expect_error<InvalidArgument>(
      [&] {
        ops::embedding_forward(Tensor::empty({3, kC}), Tensor::empty({2}, DType::i32),
                               numbered_table());
      },
      "embedding_forward: out must be [N, C] (N = ids, C = table's) = [2, 3] after flattening");
}

}  // namespace
}  // namespace meshtrain
