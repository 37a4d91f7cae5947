// Elementwise kernels: residual add, axpy, scaling, the squared norm and dtype casts, over f32 or
// bf16 storage with f32 math (simd.h), split across the calling thread's CPU threads.
#include <algorithm>
#include <cstring>

#include "meshtrain/core/bf16.h"
#include "meshtrain/core/ops/cpu/cpu_ops.h"
#include "meshtrain/core/ops/cpu/parallel.h"
#include "meshtrain/core/ops/cpu/simd.h"

namespace meshtrain::ops::cpu {

namespace {
constexpr int64_t kGrain = 32768;     // elements per thread at least
constexpr int64_t kSumBlock = 16384;  // sum_squares' fixed blocks (thread-count independent)

template <typename T>
MT_INLINE void add_impl(const T* a, const T* b, T* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) store(out[i], load(a[i]) + load(b[i]));
}
template <typename T>
MT_INLINE void axpy_impl(T* y, float alpha, const T* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) store(y[i], load(y[i]) + alpha * load(x[i]));
}
template <typename T>
MT_INLINE void scale_impl(T* x, float alpha, int64_t n) {
  for (int64_t i = 0; i < n; ++i) store(x[i], load(x[i]) * alpha);
}
// In double over explicit lanes (simd.h): the same sum on every clone.
template <typename T>
MT_INLINE double sum_squares_impl(const T* x, int64_t n) {
  return lane_sum<double>(n, [&](int64_t i) {
    const double v = load(x[i]);
    return v * v;
  });
}

MT_CLONES void add_block(const float* a, const float* b, float* out, int64_t n) {
  add_impl(a, b, out, n);
}
MT_CLONES void add_block(const BF16* a, const BF16* b, BF16* out, int64_t n) {
  add_impl(a, b, out, n);
}
MT_CLONES void axpy_block(float* y, float alpha, const float* x, int64_t n) {
  axpy_impl(y, alpha, x, n);
}
MT_CLONES void axpy_block(BF16* y, float alpha, const BF16* x, int64_t n) {
  axpy_impl(y, alpha, x, n);
}
MT_CLONES void scale_block(float* x, float alpha, int64_t n) { scale_impl(x, alpha, n); }
MT_CLONES void scale_block(BF16* x, float alpha, int64_t n) { scale_impl(x, alpha, n); }
MT_CLONES double sum_squares_block(const float* x, int64_t n) { return sum_squares_impl(x, n); }
MT_CLONES double sum_squares_block(const BF16* x, int64_t n) { return sum_squares_impl(x, n); }
MT_CLONES void to_bf16_block(const float* in, BF16* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = round_bf16(in[i]);
}
MT_CLONES void to_f32_block(const BF16* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = load(in[i]);
}

template <typename T>
void add_as(const Tensor& out, const Tensor& a, const Tensor& b) {
  const T* x = a.data<T>();
  const T* y = b.data<T>();
  T* z = out.data<T>();
  parallel_for(out.numel(), kGrain, [&](int64_t begin, int64_t end) {
    add_block(x + begin, y + begin, z + begin, end - begin);
  });
}

template <typename T>
void axpy_as(const Tensor& y, float alpha, const Tensor& x) {
  const T* src = x.data<T>();
  T* dst = y.data<T>();
  parallel_for(y.numel(), kGrain, [&](int64_t begin, int64_t end) {
    axpy_block(dst + begin, alpha, src + begin, end - begin);
  });
}

template <typename T>
void scale_as(const Tensor& x, float alpha) {
  T* data = x.data<T>();
  parallel_for(x.numel(), kGrain,
               [&](int64_t begin, int64_t end) { scale_block(data + begin, alpha, end - begin); });
}

// Fixed blocks summed in block order: the same result for every thread count.
template <typename T>
double sum_squares_as(const Tensor& x) {
  const T* data = x.data<T>();
  const int64_t n = x.numel();
  const int64_t blocks = (n + kSumBlock - 1) / kSumBlock;
  double* partial = thread_scratch<double>(static_cast<size_t>(blocks));
  for_blocks(n, kSumBlock, [&](int64_t block, int64_t begin, int64_t end) {
    partial[block] = sum_squares_block(data + begin, end - begin);
  });
  double sum = 0.0;
  for (int64_t b = 0; b < blocks; ++b) sum += partial[b];
  return sum;
}

// n elements of `in` from element in_at into `out` at out_at, converted as cast converts.
void cast_elements(const Tensor& out, int64_t out_at, const Tensor& in, int64_t in_at, int64_t n) {
  if (out.dtype() == in.dtype()) {
    const size_t size = dtype_size(in.dtype());
    std::memcpy(static_cast<char*>(out.raw_data()) + static_cast<size_t>(out_at) * size,
                static_cast<const char*>(in.raw_data()) + static_cast<size_t>(in_at) * size,
                static_cast<size_t>(n) * size);
  } else if (out.dtype() == DType::bf16) {
    to_bf16_block(in.data<float>() + in_at, out.data<BF16>() + out_at, n);
  } else {
    to_f32_block(in.data<BF16>() + in_at, out.data<float>() + out_at, n);
  }
}
}  // namespace

void add(const Tensor& out, const Tensor& a, const Tensor& b) {
  if (out.dtype() == DType::bf16) return add_as<BF16>(out, a, b);
  add_as<float>(out, a, b);
}

void axpy(const Tensor& y, float alpha, const Tensor& x) {
  if (y.dtype() == DType::bf16) return axpy_as<BF16>(y, alpha, x);
  axpy_as<float>(y, alpha, x);
}

void scale(const Tensor& x, float alpha) {
  if (x.dtype() == DType::bf16) return scale_as<BF16>(x, alpha);
  scale_as<float>(x, alpha);
}

double sum_squares(const std::vector<Tensor>& xs) {
  double sum = 0.0;
  for (const Tensor& x : xs)
    sum += x.dtype() == DType::bf16 ? sum_squares_as<BF16>(x) : sum_squares_as<float>(x);
  return sum;
}

void cast(const Tensor& out, const Tensor& in) {
  const int64_t n = in.numel();
  if (n == 0) return;
  if (out.dtype() == in.dtype()) {
    const auto* src = static_cast<const char*>(in.raw_data());
    auto* dst = static_cast<char*>(out.raw_data());
    const int64_t bytes = static_cast<int64_t>(in.nbytes());
    if (src == dst) return;
    if (src < dst + bytes && dst < src + bytes) {  // overlapping: one memmove
      std::memmove(dst, src, static_cast<size_t>(bytes));
      return;
    }
  }
  parallel_for(n, kGrain, [&](int64_t begin, int64_t end) {
    cast_elements(out, begin, in, begin, end - begin);
  });
}

void cast_columns(const Tensor& out, int64_t out_col, const Tensor& in, int64_t in_col,
                  int64_t cols) {
  if (cols == 0) return;
  const int64_t in_row = in.dim(1), out_row = out.dim(1);
  // The window's elements in row-major order, split across threads wherever rows end.
  parallel_for(in.dim(0) * cols, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end;) {
      const int64_t r = i / cols, c = i % cols, n = std::min(end - i, cols - c);
      cast_elements(out, r * out_row + out_col + c, in, r * in_row + in_col + c, n);
      i += n;
    }
  });
}

}  // namespace meshtrain::ops::cpu
