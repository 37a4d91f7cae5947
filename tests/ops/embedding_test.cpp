// Embedding lookup and its scatter-add backward, with repeated ids, in closed form; on a slice of
// the vocabulary against naive loops, and two slices against the whole table.
#include <gtest/gtest.h>

#include "meshtrain/core/error.h"
#include "meshtrain/core/ops/ops.h"
#include "tests/ops/test_tensors.h"
#include "tests/support/error_message.h"

namespace meshtrain {
namespace {

constexpr int64_t kV = 5, kC = 3;

// table[v][c] = 10 (first + v) + c for the rows of ids [first, first + rows), so every row is
// recognisable by its id.
Tensor numbered_table(int64_t rows = kV, int64_t first = 0) {
  std::vector<float> values;
  for (int64_t v = first; v < first + rows; ++v)
    for (int64_t c = 0; c < kC; ++c) values.push_back(static_cast<float>(10 * v + c));
  return Tensor::from_vector(values, {rows, kC});
}

TEST(OpsEmbedding, ForwardCopiesTheRowsOfTheIds) {
  const Tensor ids = Tensor::from_vector(std::vector<int32_t>{0, 3, 3, 4}, {2, 2});
  const Tensor out = Tensor::empty({2, 2, kC});
  ops::embedding_forward(out, ids, numbered_table(), 0);
  EXPECT_EQ(out.to_vector(), (std::vector<float>{0, 1, 2, 30, 31, 32, 30, 31, 32, 40, 41, 42}));
}

TEST(OpsEmbedding, BackwardAddsEveryOccurrence) {
  const Tensor ids = Tensor::from_vector(std::vector<int32_t>{0, 3, 3, 4}, {4});
  const Tensor d_out = Tensor::from_vector(
      std::vector<float>{1, 2, 3, 10, 20, 30, 100, 200, 300, -1, -2, -3}, {4, kC});
  const Tensor d_table = Tensor::from_vector(std::vector<float>(kV * kC, 0.5f), {kV, kC});
  ops::embedding_backward(d_table, d_out, ids, 0);
  EXPECT_EQ(d_table.to_vector(), (std::vector<float>{1.5f, 2.5f, 3.5f,        // id 0
                                                     0.5f, 0.5f, 0.5f,        // unused
                                                     0.5f, 0.5f, 0.5f,        // unused
                                                     110.5f, 220.5f, 330.5f,  // id 3 twice
                                                     -0.5f, -1.5f, -2.5f}));  // id 4
}

// A table holding ids [4, 9) of a larger vocabulary; ids below, inside (both ends, one repeated)
// and above the slice, and one negative.
constexpr int64_t kStart = 4;
const std::vector<int32_t> kSliceIds = {0, 4, 6, 8, 9, 6, 12, -1, 3};

TEST(OpsEmbedding, SliceReadsItsRowsAndZerosElsewhere) {
  const Tensor table = numbered_table(kV, kStart);
  const Tensor ids = Tensor::from_vector(kSliceIds, {static_cast<int64_t>(kSliceIds.size())});
  const Tensor out = Tensor::from_vector(std::vector<float>(kSliceIds.size() * kC, 7.0f),
                                         {static_cast<int64_t>(kSliceIds.size()), kC});
  ops::embedding_forward(out, ids, table, kStart);
  std::vector<float> want;
  for (int32_t id : kSliceIds)
    for (int64_t c = 0; c < kC; ++c)
      want.push_back(id >= kStart && id < kStart + kV ? static_cast<float>(10 * id + c) : 0.0f);
  EXPECT_EQ(out.to_vector(), want);
}

TEST(OpsEmbedding, SliceAccumulatesOnlyItsRows) {
  const int64_t n = static_cast<int64_t>(kSliceIds.size());
  const Tensor ids = Tensor::from_vector(kSliceIds, {n});
  const Tensor d_out = test::random_tensor({n, kC}, 1);
  const Tensor d_table = test::random_tensor({kV, kC}, 2);
  std::vector<float> want = d_table.to_vector();
  const std::vector<float> dy = d_out.to_vector();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t row = kSliceIds[i] - kStart;
    if (row < 0 || row >= kV) continue;
    for (int64_t c = 0; c < kC; ++c) want[row * kC + c] += dy[i * kC + c];
  }
  ops::embedding_backward(d_table, d_out, ids, kStart);
  EXPECT_EQ(d_table.to_vector(), want);
}

// Rows [0, 3) and [3, 8) of an 8-row vocabulary, as two tensor-parallel ranks hold them: the sum of
// their outputs is the whole table's output, and their gradients are its gradient's rows.
TEST(OpsEmbedding, TwoSlicesReproduceTheWholeTable) {
  constexpr int64_t kVocab = 8, kSplit = 3;
  const std::vector<int32_t> id_values = {7, 0, 2, 3, 3, 5, 2};
  const int64_t n = static_cast<int64_t>(id_values.size());
  const Tensor ids = Tensor::from_vector(id_values, {n});
  const Tensor whole = test::random_tensor({kVocab, kC}, 3);
  const Tensor low = whole.rows(0, kSplit).clone(),
               high = whole.rows(kSplit, kVocab - kSplit).clone();

  const Tensor want = Tensor::empty({n, kC}), out_low = Tensor::empty({n, kC}),
               out_high = Tensor::empty({n, kC});
  ops::embedding_forward(want, ids, whole, 0);
  ops::embedding_forward(out_low, ids, low, 0);
  ops::embedding_forward(out_high, ids, high, kSplit);
  ops::add(out_low, out_low, out_high);  // each element: one copy plus an exact zero
  EXPECT_EQ(out_low.to_vector(), want.to_vector());

  const Tensor d_out = test::random_tensor({n, kC}, 4);
  const Tensor d_whole = Tensor::zeros({kVocab, kC});
  const Tensor d_low = Tensor::zeros({kSplit, kC}), d_high = Tensor::zeros({kVocab - kSplit, kC});
  ops::embedding_backward(d_whole, d_out, ids, 0);
  ops::embedding_backward(d_low, d_out, ids, 0);
  ops::embedding_backward(d_high, d_out, ids, kSplit);
  EXPECT_EQ(d_low.to_vector(), d_whole.rows(0, kSplit).to_vector());
  EXPECT_EQ(d_high.to_vector(), d_whole.rows(kSplit, kVocab - kSplit).to_vector());
}

// A rank may hold no rows at all: every id is elsewhere.
TEST(OpsEmbedding, EmptySliceGivesZeros) {
  const Tensor ids = Tensor::from_vector(std::vector<int32_t>{0, 2}, {2});
  const Tensor out = Tensor::from_vector(std::vector<float>(2 * kC, 7.0f), {2, kC});
  ops::embedding_forward(out, ids, Tensor::empty({0, kC}), 2);
  EXPECT_EQ(out.to_vector(), std::vector<float>(2 * kC, 0.0f));
  ops::embedding_backward(Tensor::empty({0, kC}), out, ids, 2);  // nothing to add to
}

TEST(OpsEmbeddingValidation, ShapesDtypesAndVocabStart) {
  const Tensor out = Tensor::empty({2, kC});
  const Tensor ids = Tensor::from_vector(std::vector<int32_t>{1, 2}, {2});
  testing::expect_error<InvalidArgument>(
      [&] { ops::embedding_forward(out, Tensor::empty({2}), numbered_table(), 0); },
      "embedding_forward: ids must be i32, got f32[2] on cpu");
  testing::expect_error<InvalidArgument>(
      [&] {
        ops::embedding_forward(Tensor::empty({3, kC}), ids, numbered_table(), 0);
      },
      "embedding_forward: out must be [N, C] (N = ids, C = table's) = [2, 3] after flattening, "
      "got f32[3, 3] on cpu");
  testing::expect_error<InvalidArgument>(
      [&] { ops::embedding_forward(out, ids, Tensor::empty({kV * kC}), 0); },
      "embedding_forward: table must be [V, C] = [*, *], got f32[15] on cpu");
  testing::expect_error<InvalidArgument>(
      [&] {
        ops::embedding_forward(out, ids, Tensor::empty({kV, kC}, DType::i32), 0);
      },
      "embedding_forward: table must be f32 or bf16, got i32[5, 3] on cpu");
  testing::expect_error<InvalidArgument>(
      [&] { ops::embedding_forward(out, ids, numbered_table(), -1); },
      "embedding_forward: vocab_start must be >= 0, got -1");
  testing::expect_error<InvalidArgument>(
      [&] {
        ops::embedding_backward(Tensor::zeros({kV, kC}), Tensor::zeros({2, kC + 1}), ids, 0);
      },
      "embedding_backward: d_out must be [N, C] (N = ids, C = d_table's) = [2, 3] after "
      "flattening, got f32[2, 4] on cpu");
  testing::expect_error<InvalidArgument>(
      [&] {
        ops::embedding_backward(Tensor::zeros({kV, kC}), Tensor::zeros({2, kC}), ids, -3);
      },
      "embedding_backward: vocab_start must be >= 0, got -3");
}

}  // namespace
}  // namespace meshtrain
