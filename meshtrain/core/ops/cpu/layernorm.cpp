// LayerNorm over the last dim, saving per-row mean and reciprocal std for the backward pass; f32
// math over f32 or bf16 storage (statistics always f32), rows split across threads.
#include <cmath>

#include "meshtrain/core/ops/cpu/cpu_ops.h"
#include "meshtrain/core/ops/cpu/parallel.h"
#include "meshtrain/core/ops/cpu/simd.h"

namespace meshtrain::ops::cpu {

namespace {
// Backward's d_weight / d_bias sum over rows in fixed blocks of this many rows, each into its own
// partial, then the partials in block order: the same sums for every thread count.
constexpr int64_t kBackwardBlockRows = 64;

template <typename T>
MT_INLINE void forward_rows(const T* in, T* out, const T* weight, const T* bias, float* means,
                            float* rstds, int64_t channels, int64_t first, int64_t last,
                            float eps) {
  const float inv_c = 1.0f / static_cast<float>(channels);
  for (int64_t r = first; r < last; ++r) {
    const T* x = in + r * channels;
    T* y = out + r * channels;
    // Two passes (mean, then squared deviations) avoid the cancellation of E[x^2] - E[x]^2; the
    // row is in L1 after the first, so the second costs no memory traffic.
    const float m = lane_sum(channels, [&](int64_t c) { return load(x[c]); }) * inv_c;
    const float sq = lane_sum(channels, [&](int64_t c) {
      const float d = load(x[c]) - m;
      return d * d;
    });
    const float s = 1.0f / std::sqrt(sq * inv_c + eps);
    for (int64_t c = 0; c < channels; ++c)
      store(y[c], (load(x[c]) - m) * s * load(weight[c]) + load(bias[c]));
    means[r] = m;
    rstds[r] = s;
  }
}

// d_in for rows [first, last), and their d_weight / d_bias contributions added into dw / db (f32
// scratch of this kernel, apart from every tensor: __restrict spares GCC the overlap checks).
template <typename T>
MT_INLINE void backward_rows(const T* in, const T* d_out, T* d_in, const T* weight,
                             const float* means, const float* rstds, float* __restrict dw,
                             float* __restrict db, int64_t channels, int64_t first, int64_t last) {
  const float inv_c = 1.0f / static_cast<float>(channels);
  for (int64_t r = first; r < last; ++r) {
    const T* x = in + r * channels;
    const T* dy = d_out + r * channels;
    T* dx = d_in + r * channels;
    const float m = means[r], s = rstds[r];
    // d_in = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = d_out * weight.
    const float g_mean =
        lane_sum(channels, [&](int64_t c) { return load(dy[c]) * load(weight[c]); }) * inv_c;
    const float g_xhat_mean =
        lane_sum(
            channels,
            [&](int64_t c) { return load(dy[c]) * load(weight[c]) * ((load(x[c]) - m) * s); }) *
        inv_c;
    for (int64_t c = 0; c < channels; ++c) {
      const float g = load(dy[c]);
      const float xhat = (load(x[c]) - m) * s;
      store(dx[c], (g * load(weight[c]) - g_mean - xhat * g_xhat_mean) * s);
      dw[c] += g * xhat;
      db[c] += g;
    }
  }
}

MT_CLONES void forward_block(const float* in, float* out, const float* weight, const float* bias,
                             float* means, float* rstds, int64_t channels, int64_t first,
                             int64_t last, float eps) {
  forward_rows(in, out, weight, bias, means, rstds, channels, first, last, eps);
}
MT_CLONES void forward_block(const BF16* in, BF16* out, const BF16* weight, const BF16* bias,
                             float* means, float* rstds, int64_t channels, int64_t first,
                             int64_t last, float eps) {
  forward_rows(in, out, weight, bias, means, rstds, channels, first, last, eps);
}
MT_CLONES void backward_block(const float* in, const float* d_out, float* d_in, const float* weight,
                              const float* means, const float* rstds, float* dw, float* db,
                              int64_t channels, int64_t first, int64_t last) {
  backward_rows(in, d_out, d_in, weight, means, rstds, dw, db, channels, first, last);
}
MT_CLONES void backward_block(const BF16* in, const BF16* d_out, BF16* d_in, const BF16* weight,
                              const float* means, const float* rstds, float* dw, float* db,
                              int64_t channels, int64_t first, int64_t last) {
  backward_rows(in, d_out, d_in, weight, means, rstds, dw, db, channels, first, last);
}

template <typename T>
MT_INLINE void add_partials(T* dw, T* db, const float* partials, int64_t blocks, int64_t channels) {
  for (int64_t c = 0; c < channels; ++c) {
    float w = 0.0f, b = 0.0f;
    for (int64_t k = 0; k < blocks; ++k) {
      w += partials[(2 * k) * channels + c];
      b += partials[(2 * k + 1) * channels + c];
    }
    store(dw[c], load(dw[c]) + w);
    store(db[c], load(db[c]) + b);
  }
}
MT_CLONES void add_partials_block(float* dw, float* db, const float* partials, int64_t blocks,
                                  int64_t channels) {
  add_partials(dw, db, partials, blocks, channels);
}
MT_CLONES void add_partials_block(BF16* dw, BF16* db, const float* partials, int64_t blocks,
                                  int64_t channels) {
  add_partials(dw, db, partials, blocks, channels);
}

template <typename T>
void forward_as(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& in,
                const Tensor& weight, const Tensor& bias, float eps) {
  const int64_t channels = weight.numel();
  const int64_t rows = channels ? in.numel() / channels : 0;
  const T* x = in.data<T>();
  T* y = out.data<T>();
  const T* w = weight.data<T>();
  const T* b = bias.data<T>();
  float* means = mean.data<float>();
  float* rstds = rstd.data<float>();
  parallel_for(rows, std::max<int64_t>(8192 / std::max<int64_t>(channels, 1), 1),
               [&](int64_t first, int64_t last) {
                 forward_block(x, y, w, b, means, rstds, channels, first, last, eps);
               });
}

template <typename T>
void backward_as(const Tensor& d_in, const Tensor& d_weight, const Tensor& d_bias,
                 const Tensor& d_out, const Tensor& in, const Tensor& weight, const Tensor& mean,
                 const Tensor& rstd) {
  const int64_t channels = weight.numel();
  const int64_t rows = channels ? in.numel() / channels : 0;
  const int64_t blocks = (rows + kBackwardBlockRows - 1) / kBackwardBlockRows;
  // Per block: d_weight's partial, then d_bias's, each [channels].
  float* partials = thread_scratch<float>(static_cast<size_t>(2 * blocks * channels));
  const T* x = in.data<T>();
  const T* dy = d_out.data<T>();
  T* dx = d_in.data<T>();
  const T* w = weight.data<T>();
  const float* means = mean.data<float>();
  const float* rstds = rstd.data<float>();
  for_blocks(rows, kBackwardBlockRows, [&](int64_t block, int64_t first, int64_t last) {
    float* dw = partials + 2 * block * channels;
    float* db = dw + channels;
    std::fill(dw, db + channels, 0.0f);
    backward_block(x, dy, dx, w, means, rstds, dw, db, channels, first, last);
  });
  add_partials_block(d_weight.data<T>(), d_bias.data<T>(), partials, blocks, channels);
}
}  // namespace

void layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& in,
                       const Tensor& weight, const Tensor& bias, float eps) {
  if (in.dtype() == DType::bf16) return forward_as<BF16>(out, mean, rstd, in, weight, bias, eps);
  forward_as<float>(out, mean, rstd, in, weight, bias, eps);
}

void layernorm_backward(const Tensor& d_in, const Tensor& d_weight, const Tensor& d_bias,
                        const Tensor& d_out, const Tensor& in, const Tensor& weight,
                        const Tensor& mean, const Tensor& rstd) {
  if (in.dtype() == DType::bf16)
    return backward_as<BF16>(d_in, d_weight, d_bias, d_out, in, weight, mean, rstd);
  backward_as<float>(d_in, d_weight, d_bias, d_out, in, weight, mean, rstd);
}

}  // namespace meshtrain::ops::cpu
