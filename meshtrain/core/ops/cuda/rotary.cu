// Rotary position embedding (Llama's, Hugging Face's rotate-half layout), in place: a kernel fills
// the call's cos/sin table, one entry per (position, frequency), so that the transcendental calls
// are not repeated per batch row and head; a second rotates every (x1[i], x2[i]) pair with it.
// Backward is the same rotation with the sines negated.
#include "meshtrain/core/ops/cuda/cuda_ops.h"
#include "meshtrain/core/ops/cuda/kernel_utils.cuh"

namespace meshtrain::ops::cuda {

namespace {

// cos / sin [seq, half] of angle = p * inv_freq[i] for positions p = first_position + t, in f32
// as transformers (and the CPU kernel) computes them: inv_freq = 1 / theta^(2i / head_dim).
// `sign` -1 negates the angle (the inverse rotation).
struct RotaryTable {
  float* cos_table;
  float* sin_table;
  int64_t half, head_dim, first_position;
  float theta, sign;
  __device__ void operator()(int64_t e) const {
    const int64_t t = e / half, i = e % half;
    const float inv_freq =
        1.0f / powf(theta, static_cast<float>(2 * i) / static_cast<float>(head_dim));
    const float angle = static_cast<float>(first_position + t) * inv_freq;
    float s, c;
    sincosf(angle, &s, &c);
    cos_table[e] = c;
    sin_table[e] = sign * s;
  }
};

// Pair e: row r of x [B * T, width], head `head`, frequency i; x1 <- x1 cos - x2 sin,
// x2 <- x2 cos + x1 sin with the table entry of the row's position.
template <typename T>
struct RotatePairs {
  T* x;
  const float* cos_table;
  const float* sin_table;
  int64_t seq, width, head_dim;
  __device__ void operator()(int64_t e) const {
    const int64_t half = head_dim / 2, pairs_per_row = width / 2;
    const int64_t r = e / pairs_per_row, in_row = e % pairs_per_row;
    const int64_t head = in_row / half, i = in_row % half;
    T* x1 = x + r * width + head * head_dim + i;
    T* x2 = x1 + half;
    const int64_t entry = (r % seq) * half + i;
    const float c = cos_table[entry], s = sin_table[entry];
    const float a = as_float(*x1), b = as_float(*x2);
    *x1 = from_float<T>(a * c - b * s);
    *x2 = from_float<T>(b * c + a * s);
  }
};

void rotate(const Tensor& x, int64_t head_dim, float theta, int64_t first_position, float sign) {
  use_device(x);
  const int64_t seq = x.dim(1), width = x.dim(2), rows = x.dim(0) * seq;
  if (rows == 0 || width == 0) return;
  const int64_t half = head_dim / 2;
  Scratch table(x, static_cast<size_t>(2 * seq * half) * sizeof(float));
  float* cos_table = table.as<float>();
  float* sin_table = cos_table + seq * half;
  launch_elementwise(
      seq * half, RotaryTable{cos_table, sin_table, half, head_dim, first_position, theta, sign});
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_elementwise(rows * width / 2,
                       RotatePairs<T>{ptr<T>(x), cos_table, sin_table, seq, width, head_dim});
  });
}

}  // namespace

void rotary_forward(const Tensor& x, int64_t head_dim, float theta, int64_t first_position) {
  rotate(x, head_dim, theta, first_position, 1.0f);
}

void rotary_backward(const Tensor& d_x, int64_t head_dim, float theta, int64_t first_position) {
  rotate(d_x, head_dim, theta, first_position, -1.0f);
}

}  // namespace meshtrain::ops::cuda
