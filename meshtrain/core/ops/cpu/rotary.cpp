// Rotary position embedding (Llama's, Hugging Face's rotate-half layout), in place. Each call first
// fills a cos/sin table with one entry per (position, frequency), so that the transcendental calls
// are not repeated per batch row and head; the rotation then runs over rows in parallel, in f32
// over f32 or bf16 storage. Backward is the same rotation with the sines negated.
#include <algorithm>
#include <cmath>

#include "meshtrain/core/ops/cpu/cpu_ops.h"
#include "meshtrain/core/ops/cpu/parallel.h"
#include "meshtrain/core/ops/cpu/simd.h"

namespace meshtrain::ops::cpu {

namespace {
constexpr int64_t kGrain = 16384;  // elements per thread at least

// cos / sin [seq, half] of angle = p * inv_freq[i] for positions p = first_position + t, in f32
// as transformers computes them (inv_freq = 1 / theta^(2i / head_dim)); `sign` -1 negates the
// angle (the inverse rotation).
void fill_table(float* cos_table, float* sin_table, int64_t seq, int64_t head_dim, float theta,
                int64_t first_position, float sign) {
  const int64_t half = head_dim / 2;
  float* inv_freq = thread_scratch<float>(static_cast<size_t>(half), 1);
  for (int64_t i = 0; i < half; ++i)
    inv_freq[i] = 1.0f / std::pow(theta, static_cast<float>(2 * i) / static_cast<float>(head_dim));
  parallel_for(seq, std::max<int64_t>(kGrain / half, 1), [&](int64_t first, int64_t last) {
    for (int64_t t = first; t < last; ++t) {
      const auto position = static_cast<float>(first_position + t);
      for (int64_t i = 0; i < half; ++i) {
        const float angle = position * inv_freq[i];
        cos_table[t * half + i] = std::cos(angle);
        sin_table[t * half + i] = sign * std::sin(angle);
      }
    }
  });
}

// Rows [first, last) of x [B * T, width], each `width / head_dim` heads: x1 <- x1 cos - x2 sin,
// x2 <- x2 cos + x1 sin with the table row of the row's position.
template <typename T>
MT_INLINE void rotate_rows(T* x, const float* cos_table, const float* sin_table, int64_t seq,
                           int64_t width, int64_t head_dim, int64_t first, int64_t last) {
  const int64_t half = head_dim / 2;
  for (int64_t r = first; r < last; ++r) {
    const float* c = cos_table + (r % seq) * half;
    const float* s = sin_table + (r % seq) * half;
    for (int64_t head = 0; head < width; head += head_dim) {
      T* x1 = x + r * width + head;
      T* x2 = x1 + half;
      for (int64_t i = 0; i < half; ++i) {
        const float a = load(x1[i]), b = load(x2[i]);
        store(x1[i], a * c[i] - b * s[i]);
        store(x2[i], b * c[i] + a * s[i]);
      }
    }
  }
}

MT_CLONES void rotate_block(float* x, const float* cos_table, const float* sin_table, int64_t seq,
                            int64_t width, int64_t head_dim, int64_t first, int64_t last) {
  rotate_rows(x, cos_table, sin_table, seq, width, head_dim, first, last);
}
MT_CLONES void rotate_block(BF16* x, const float* cos_table, const float* sin_table, int64_t seq,
                            int64_t width, int64_t head_dim, int64_t first, int64_t last) {
  rotate_rows(x, cos_table, sin_table, seq, width, head_dim, first, last);
}

template <typename T>
void rotate_as(const Tensor& x, int64_t head_dim, float theta, int64_t first_position, float sign) {
  const int64_t seq = x.dim(1), width = x.dim(2), rows = x.dim(0) * seq;
  if (rows == 0 || width == 0) return;
  const int64_t half = head_dim / 2;
  float* cos_table = thread_scratch<float>(static_cast<size_t>(2 * seq * half));
  float* sin_table = cos_table + seq * half;
  fill_table(cos_table, sin_table, seq, head_dim, theta, first_position, sign);
  T* data = x.data<T>();
  parallel_for(rows, std::max<int64_t>(kGrain / width, 1), [&](int64_t first, int64_t last) {
    rotate_block(data, cos_table, sin_table, seq, width, head_dim, first, last);
  });
}

void rotate(const Tensor& x, int64_t head_dim, float theta, int64_t first_position, float sign) {
  if (x.dtype() == DType::bf16) return rotate_as<BF16>(x, head_dim, theta, first_position, sign);
  rotate_as<float>(x, head_dim, theta, first_position, sign);
}
}  // namespace

void rotary_forward(const Tensor& x, int64_t head_dim, float theta, int64_t first_position) {
  rotate(x, head_dim, theta, first_position, 1.0f);
}

void rotary_backward(const Tensor& d_x, int64_t head_dim, float theta, int64_t first_position) {
  rotate(d_x, head_dim, theta, first_position, -1.0f);
}

}  // namespace meshtrain::ops::cpu
