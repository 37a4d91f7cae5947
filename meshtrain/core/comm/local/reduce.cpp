#include "meshtrain/core/comm/local/reduce.h"

#include <algorithm>

#include "meshtrain/core/bf16.h"
#include "meshtrain/core/error.h"

namespace meshtrain::local {

namespace {

template <typename T>
struct Accumulate;
template <>
struct Accumulate<float> {
  using Acc = float;
  static Acc load(float v) { return v; }
  static float store(Acc a) { return a; }
};
template <>
struct Accumulate<BF16> {
  using Acc = float;
  static Acc load(BF16 v) { return to_f32(v); }
  static BF16 store(Acc a) { return to_bf16(a); }
};
template <>
struct Accumulate<int32_t> {
  using Acc = int64_t;
  static Acc load(int32_t v) { return v; }
  static int32_t store(Acc a) { return static_cast<int32_t>(a); }
};

// Blocks small enough for the accumulator to stay in L1, long enough for the loops to vectorise.
constexpr int64_t kBlock = 2048;

template <typename T>
void reduce_typed(T* dst, const void* const* srcs, int count, int64_t n, ReduceOp op) {
  using A = Accumulate<T>;
  typename A::Acc acc[kBlock];
  for (int64_t base = 0; base < n; base += kBlock) {
    const int64_t m = std::min(kBlock, n - base);
    const T* first = static_cast<const T*>(srcs[0]) + base;
    for (int64_t i = 0; i < m; ++i) acc[i] = A::load(first[i]);
    for (int k = 1; k < count; ++k) {
      const T* src = static_cast<const T*>(srcs[k]) + base;
      if (op == ReduceOp::max) {
        for (int64_t i = 0; i < m; ++i) acc[i] = std::max(acc[i], A::load(src[i]));
      } else {
        for (int64_t i = 0; i < m; ++i) acc[i] += A::load(src[i]);
      }
    }
    if (op == ReduceOp::avg) {
      const auto divisor = static_cast<typename A::Acc>(count);
      for (int64_t i = 0; i < m; ++i) acc[i] /= divisor;
    }
    T* out = dst + base;
    for (int64_t i = 0; i < m; ++i) out[i] = A::store(acc[i]);
  }
}

}  // namespace

void reduce_into(void* dst, const void* const* srcs, int count, int64_t n, DType dtype,
                 ReduceOp op) {
  MT_ASSERT_GE(count, 1, "reduce_into needs at least one source");
  switch (dtype) {
    case DType::f32: return reduce_typed(static_cast<float*>(dst), srcs, count, n, op);
    case DType::bf16: return reduce_typed(static_cast<BF16*>(dst), srcs, count, n, op);
    case DType::i32:
      MT_CHECK(op != ReduceOp::avg, "avg is not defined on i32 buffers; use sum or max");
      return reduce_typed(static_cast<int32_t*>(dst), srcs, count, n, op);
  }
}

}  // namespace meshtrain::local
