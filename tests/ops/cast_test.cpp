// f32 <-> bf16 casts, bit-exact on the hard cases of round-to-nearest-even.
#include <gtest/gtest.h>

#include <cstring>

#include "meshtrain/core/bf16.h"
#include "meshtrain/core/error.h"
#include "meshtrain/core/ops/ops.h"
#include "tests/support/error_message.h"

namespace meshtrain {
namespace {

float from_bits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Casts the f32 values given by their bits and returns the bf16 bits.
std::vector<uint16_t> cast_to_bf16(const std::vector<uint32_t>& f32_bits) {
  std::vector<float> values;
  for (uint32_t bits : f32_bits) values.push_back(from_bits(bits));
  const Tensor in = Tensor::from_vector(values, {static_cast<int64_t>(values.size())});
  const Tensor out = Tensor::empty(in.shape(), DType::bf16);
  ops::cast(out, in);
  std::vector<uint16_t> result;
  for (int64_t i = 0; i < out.numel(); ++i) result.push_back(out.data<BF16>()[i].bits);
  return result;
}

TEST(OpsCast, RoundsToNearestWithTiesToEven) {
  EXPECT_EQ(cast_to_bf16({
                0x3f800000,  // 1.0: exact
                0x3f807fff,  // just below the midpoint of 0x3f80 and 0x3f81: down
                0x3f808000,  // tie, 0x3f80 even: down
                0x3f808001,  // just above the midpoint: up
                0x3f818000,  // tie, 0x3f81 odd: up to 0x3f82
                0xbf818000,  // same for negatives
                0x3fff8000,  // tie whose carry moves into the exponent: 0x4000 (2.0)
            }),
            (std::vector<uint16_t>{0x3f80, 0x3f80, 0x3f80, 0x3f81, 0x3f82, 0xbf82, 0x4000}));
}

TEST(OpsCast, SubnormalsAndSignedZero) {
  EXPECT_EQ(cast_to_bf16({
                0x00010000,  // smallest bf16 subnormal: exact
                0x00008000,  // half of it, tie to even: +0
                0x00018000,  // tie between 0x0001 (odd) and 0x0002: up
                0x00010001,  // just above 0x0001: down to it
                0x80008001,  // negative, just above the half: -smallest
                0x80000000,  // -0 keeps its sign
            }),
            (std::vector<uint16_t>{0x0001, 0x0000, 0x0002, 0x0001, 0x8001, 0x8000}));
}

TEST(OpsCast, InfinitiesOverflowAndNaN) {
  const std::vector<uint16_t> got = cast_to_bf16({
      0x7f800000,  // +inf
      0xff800000,  // -inf
      0x7f7f0000,  // max finite bf16: exact
      0x7f7fffff,  // max finite f32: rounds up to +inf
      0x7f7f8000,  // tie above max bf16 (odd): +inf
      0xff7fffff,  // -max f32: -inf
      0x7fc00000,  // quiet NaN
      0x7f800001,  // NaN whose payload lies only in the dropped bits: must not become inf
      0xff800001,
  });
  EXPECT_EQ(std::vector<uint16_t>(got.begin(), got.begin() + 6),
            (std::vector<uint16_t>{0x7f80, 0xff80, 0x7f7f, 0x7f80, 0x7f80, 0xff80}));
  for (size_t i = 6; i < got.size(); ++i) {
    EXPECT_EQ(got[i] & 0x7f80, 0x7f80) << i;  // exponent all ones
    EXPECT_NE(got[i] & 0x007f, 0) << i;       // and a nonzero mantissa: NaN
  }
  EXPECT_EQ(got[8] & 0x8000, 0x8000);  // sign kept
}

TEST(OpsCast, Bf16ToF32IsExactAndCopiesKeepBits) {
  const std::vector<uint16_t> bits = {0x3f80, 0xbf82, 0x0001, 0x7f80, 0xff80, 0x7f7f, 0x8000};
  const Tensor in = Tensor::empty({static_cast<int64_t>(bits.size())}, DType::bf16);
  for (size_t i = 0; i < bits.size(); ++i) in.data<BF16>()[i] = BF16{bits[i]};
  const Tensor wide = Tensor::empty(in.shape(), DType::f32);
  ops::cast(wide, in);
  for (size_t i = 0; i < bits.size(); ++i) {
    uint32_t got;
    std::memcpy(&got, &wide.data<float>()[i], sizeof got);
    EXPECT_EQ(got, static_cast<uint32_t>(bits[i]) << 16) << i;
  }
  const Tensor copy = Tensor::empty(in.shape(), DType::bf16);
  ops::cast(copy, in);
  for (size_t i = 0; i < bits.size(); ++i) EXPECT_EQ(copy.data<BF16>()[i].bits, bits[i]);

  const Tensor ids = Tensor::from_vector(std::vector<int32_t>{7, -3}, {2});
  const Tensor ids_copy = Tensor::empty({1, 2}, DType::i32);
  ops::cast(ids_copy, ids);
  EXPECT_EQ(ids_copy.to_vector(), (std::vector<float>{7, -3}));
}

// A window of columns of every row, converted, the rest of out untouched: FSDP's parameter out
// of its all-gather [ranks, shard] and its gradient back into a reduce-scatter's input.
TEST(OpsCastColumns, CopiesTheWindowOfEveryRowAndNothingElse) {
  std::vector<float> values(3 * 5);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.5f + static_cast<float>(i);
  const Tensor in = Tensor::from_vector(values, {3, 5});
  const Tensor out = Tensor::from_vector(std::vector<float>(3 * 4, -1.f), {3, 4});
  ops::cast_columns(out, 1, in, 2, 3);
  EXPECT_EQ(out.to_vector(), (std::vector<float>{-1, 2.5, 3.5, 4.5,  //
                                                 -1, 7.5, 8.5, 9.5,  //
                                                 -1, 12.5, 13.5, 14.5}));
  const Tensor narrow = Tensor::zeros({3, 2}, DType::bf16);
  ops::cast_columns(narrow, 0, in, 3, 2);
  EXPECT_EQ(narrow.to_vector(), (std::vector<float>{3.5, 4.5, 8.5, 9.5, 13.5, 14.5}));
  const Tensor wide = Tensor::zeros({3, 3});
  ops::cast_columns(wide, 1, narrow, 0, 2);
  EXPECT_EQ(wide.to_vector(), (std::vector<float>{0, 3.5, 4.5, 0, 8.5, 9.5, 0, 13.5, 14.5}));
}

// Rows long enough that the threads split the window inside rows as well as between them.
TEST(OpsCastColumns, EqualsOneCastPerRowOnLongRows) {
  const int64_t rows = 3, in_cols = 70001, out_cols = 50000, cols = 49999;
  std::vector<float> values(static_cast<size_t>(rows * in_cols));
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 997) * 0.25f;
  const Tensor in = Tensor::from_vector(values, {rows, in_cols});
  const Tensor got = Tensor::zeros({rows, out_cols}, DType::bf16);
  const Tensor want = Tensor::zeros({rows, out_cols}, DType::bf16);
  ops::cast_columns(got, 1, in, 7, cols);
  for (int64_t r = 0; r < rows; ++r)
    ops::cast(want.view(r * out_cols + 1, {cols}), in.view(r * in_cols + 7, {cols}));
  EXPECT_EQ(got.to_vector(), want.to_vector());
}

TEST(OpsCastValidation, UnsupportedPairsAndSizes) {
  testing::expect_error<InvalidArgument>(
      [] { ops::cast(Tensor::empty({2}), Tensor::empty({2}, DType::i32)); },
      "cast: converts f32 <-> bf16 or copies within one dtype, got in = i32[2] on cpu");
  testing::expect_error<InvalidArgument>(
      [] { ops::cast(Tensor::empty({3}, DType::bf16), Tensor::empty({2})); },
      "cast: out must hold the elements of in = 2 elements, got bf16[3] on cpu");
  testing::expect_error<InvalidArgument>(
      [] {
        ops::cast_columns(Tensor::empty({2, 3}), 0, Tensor::empty({3, 3}), 0, 1);
      },
      "cast_columns: out must be [rows, out columns] = [3, *], got f32[2, 3] on cpu");
  testing::expect_error<InvalidArgument>(
      [] {
        ops::cast_columns(Tensor::empty({2, 3}), 1, Tensor::empty({2, 4}), 2, 3);
      },
      "cast_columns: columns [2, 5) of in = f32[2, 4] on cpu into columns [1, 4) of out = "
      "f32[2, 3] on cpu must lie within both");
}

}  // namespace
}  // namespace meshtrain
