// RMSNorm over the last dim (Llama's normalisation: no mean, no bias), saving the per-row
// reciprocal RMS for the backward pass; f32 math over f32 or bf16 storage (rstd always f32), rows
// split across threads.
#include <algorithm>
#include <cmath>

#include "meshtrain/core/ops/cpu/cpu_ops.h"
#include "meshtrain/core/ops/cpu/parallel.h"
#include "meshtrain/core/ops/cpu/simd.h"

namespace meshtrain::ops::cpu {

namespace {
// Backward's d_weight sums over rows in fixed blocks of this many rows, each into its own partial,
// then the partials in block order: the same sums for every thread count.
constexpr int64_t kBackwardBlockRows = 64;

template <typename T>
MT_INLINE void forward_rows(const T* in, T* out, const T* weight, float* rstds, int64_t channels,
                            int64_t first, int64_t last, float eps) {
  const float inv_c = 1.0f / static_cast<float>(channels);
  for (int64_t r = first; r < last; ++r) {
    const T* x = in + r * channels;
    T* y = out + r * channels;
    const float sq = lane_sum(channels, [&](int64_t c) { return load(x[c]) * load(x[c]); });
    const float s = 1.0f / std::sqrt(sq * inv_c + eps);
    for (int64_t c = 0; c < channels; ++c) store(y[c], load(x[c]) * s * load(weight[c]));
    rstds[r] = s;
  }
}

// d_in for rows [first, last); their d_weight contributions are added into dw when it is not null
// (f32 scratch of this kernel: __restrict spares GCC the overlap checks).
template <typename T>
MT_INLINE void backward_rows(const T* in, const T* d_out, T* d_in, const T* weight,
                             const float* rstds, float* __restrict dw, int64_t channels,
                             int64_t first, int64_t last) {
  const float inv_c = 1.0f / static_cast<float>(channels);
  for (int64_t r = first; r < last; ++r) {
    const T* x = in + r * channels;
    const T* dy = d_out + r * channels;
    T* dx = d_in + r * channels;
    const float s = rstds[r];
    // d_in = rstd * (g - xhat * mean(g * xhat)) with g = d_out * weight, xhat = in * rstd: the
    // LayerNorm gradient without the mean's term.
    const float g_xhat_mean =
        lane_sum(channels,
                 [&](int64_t c) { return load(dy[c]) * load(weight[c]) * (load(x[c]) * s); }) *
        inv_c;
    for (int64_t c = 0; c < channels; ++c) {
      const float xhat = load(x[c]) * s;
      store(dx[c], (load(dy[c]) * load(weight[c]) - xhat * g_xhat_mean) * s);
    }
    if (dw)
      for (int64_t c = 0; c < channels; ++c) dw[c] += load(dy[c]) * (load(x[c]) * s);
  }
}

MT_CLONES void forward_block(const float* in, float* out, const float* weight, float* rstds,
                             int64_t channels, int64_t first, int64_t last, float eps) {
  forward_rows(in, out, weight, rstds, channels, first, last, eps);
}
MT_CLONES void forward_block(const BF16* in, BF16* out, const BF16* weight, float* rstds,
                             int64_t channels, int64_t first, int64_t last, float eps) {
  forward_rows(in, out, weight, rstds, channels, first, last, eps);
}
MT_CLONES void backward_block(const float* in, const float* d_out, float* d_in, const float* weight,
                              const float* rstds, float* dw, int64_t channels, int64_t first,
                              int64_t last) {
  backward_rows(in, d_out, d_in, weight, rstds, dw, channels, first, last);
}
MT_CLONES void backward_block(const BF16* in, const BF16* d_out, BF16* d_in, const BF16* weight,
                              const float* rstds, float* dw, int64_t channels, int64_t first,
                              int64_t last) {
  backward_rows(in, d_out, d_in, weight, rstds, dw, channels, first, last);
}

template <typename T>
MT_INLINE void add_partials(T* dw, const float* partials, int64_t blocks, int64_t channels) {
  for (int64_t c = 0; c < channels; ++c) {
    float w = 0.0f;
    for (int64_t k = 0; k < blocks; ++k) w += partials[k * channels + c];
    store(dw[c], load(dw[c]) + w);
  }
}
MT_CLONES void add_partials_block(float* dw, const float* partials, int64_t blocks,
                                  int64_t channels) {
  add_partials(dw, partials, blocks, channels);
}
MT_CLONES void add_partials_block(BF16* dw, const float* partials, int64_t blocks,
                                  int64_t channels) {
  add_partials(dw, partials, blocks, channels);
}

template <typename T>
void forward_as(const Tensor& out, const Tensor& rstd, const Tensor& in, const Tensor& weight,
                float eps) {
  const int64_t channels = weight.numel();
  const int64_t rows = channels ? in.numel() / channels : 0;
  const T* x = in.data<T>();
  T* y = out.data<T>();
  const T* w = weight.data<T>();
  float* rstds = rstd.data<float>();
  parallel_for(rows, std::max<int64_t>(8192 / std::max<int64_t>(channels, 1), 1),
               [&](int64_t first, int64_t last) {
                 forward_block(x, y, w, rstds, channels, first, last, eps);
               });
}

template <typename T>
void backward_as(const Tensor& d_in, const Tensor& d_weight, const Tensor& d_out, const Tensor& in,
                 const Tensor& weight, const Tensor& rstd) {
  const int64_t channels = weight.numel();
  const int64_t rows = channels ? in.numel() / channels : 0;
  const T* x = in.data<T>();
  const T* dy = d_out.data<T>();
  T* dx = d_in.data<T>();
  const T* w = weight.data<T>();
  const float* rstds = rstd.data<float>();
  if (!d_weight.defined()) {  // a frozen weight: d_in alone, row by row
    parallel_for(rows, std::max<int64_t>(8192 / std::max<int64_t>(channels, 1), 1),
                 [&](int64_t first, int64_t last) {
                   backward_block(x, dy, dx, w, rstds, nullptr, channels, first, last);
                 });
    return;
  }
  const int64_t blocks = (rows + kBackwardBlockRows - 1) / kBackwardBlockRows;
  float* partials = thread_scratch<float>(static_cast<size_t>(blocks * channels));
  for_blocks(rows, kBackwardBlockRows, [&](int64_t block, int64_t first, int64_t last) {
    float* dw = partials + block * channels;
    std::fill(dw, dw + channels, 0.0f);
    backward_block(x, dy, dx, w, rstds, dw, channels, first, last);
  });
  add_partials_block(d_weight.data<T>(), partials, blocks, channels);
}
}  // namespace

void rmsnorm_forward(const Tensor& out, const Tensor& rstd, const Tensor& in, const Tensor& weight,
                     float eps) {
  if (in.dtype() == DType::bf16) return forward_as<BF16>(out, rstd, in, weight, eps);
  forward_as<float>(out, rstd, in, weight, eps);
}

void rmsnorm_backward(const Tensor& d_in, const Tensor& d_weight, const Tensor& d_out,
                      const Tensor& in, const Tensor& weight, const Tensor& rstd) {
  if (in.dtype() == DType::bf16) return backward_as<BF16>(d_in, d_weight, d_out, in, weight, rstd);
  backward_as<float>(d_in, d_weight, d_out, in, weight, rstd);
}

}  // namespace meshtrain::ops::cpu
