// LayerNorm over the last dim: one warp per row for the row statistics and d_in, and deterministic
// column sums for d_weight and d_bias.
#include "meshtrain/core/ops/cuda/cuda_ops.h"
#include "meshtrain/core/ops/cuda/kernel_utils.cuh"

namespace meshtrain::ops::cuda {

namespace {

// Two passes over the row (mean, then squared deviations) as on the CPU: no E[x^2] - E[x]^2
// cancellation.
template <typename T>
__global__ void layernorm_forward_kernel(T* out, float* mean, float* rstd, const T* in,
                                         const T* weight, const T* bias, int64_t rows, int64_t cols,
                                         float eps) {
  const int64_t row = warp_row();
  if (row >= rows) return;
  const int lane = threadIdx.x % 32;
  const T* x = in + row * cols;
  float sum = 0.0f;
  for (int64_t c = lane; c < cols; c += 32) sum += as_float(x[c]);
  const float m = warp_sum(sum) / static_cast<float>(cols);
  float sq = 0.0f;
  for (int64_t c = lane; c < cols; c += 32) {
    const float d = as_float(x[c]) - m;
    sq += d * d;
  }
  const float s = 1.0f / sqrtf(warp_sum(sq) / static_cast<float>(cols) + eps);
  T* y = out + row * cols;
  for (int64_t c = lane; c < cols; c += 32)
    y[c] = from_float<T>((as_float(x[c]) - m) * s * as_float(weight[c]) + as_float(bias[c]));
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = s;
  }
}

// d_in = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = d_out * weight.
template <typename T>
__global__ void layernorm_backward_kernel(T* d_in, const T* d_out, const T* in, const T* weight,
                                          const float* mean, const float* rstd, int64_t rows,
                                          int64_t cols) {
  const int64_t row = warp_row();
  if (row >= rows) return;
  const int lane = threadIdx.x % 32;
  const T* x = in + row * cols;
  const T* dy = d_out + row * cols;
  const float m = mean[row], s = rstd[row];
  float g_sum = 0.0f, g_xhat_sum = 0.0f;
  for (int64_t c = lane; c < cols; c += 32) {
    const float g = as_float(dy[c]) * as_float(weight[c]);
    g_sum += g;
    g_xhat_sum += g * (as_float(x[c]) - m) * s;
  }
  const float g_mean = warp_sum(g_sum) / static_cast<float>(cols);
  const float g_xhat_mean = warp_sum(g_xhat_sum) / static_cast<float>(cols);
  T* dx = d_in + row * cols;
  for (int64_t c = lane; c < cols; c += 32) {
    const float g = as_float(dy[c]) * as_float(weight[c]);
    const float xhat = (as_float(x[c]) - m) * s;
    dx[c] = from_float<T>(s * (g - g_mean - xhat * g_xhat_mean));
  }
}

// d_weight's column-sum term: d_out * xhat.
template <typename T>
struct NormalizedGrad {
  const T* d_out;
  const T* in;
  const float* mean;
  const float* rstd;
  int64_t cols;
  __device__ float operator()(int64_t r, int64_t c) const {
    const int64_t i = r * cols + c;
    return as_float(d_out[i]) * (as_float(in[i]) - mean[r]) * rstd[r];
  }
};

}  // namespace

void layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& in,
                       const Tensor& weight, const Tensor& bias, float eps) {
  use_device(out);
  const int64_t cols = weight.numel(), rows = leading_rows(in);
  if (rows == 0) return;
  dispatch_float(in.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    layernorm_forward_kernel<<<warp_rows_grid(rows), kBlockSize, 0, stream()>>>(
        ptr<T>(out), ptr<float>(mean), ptr<float>(rstd), ptr<T>(in), ptr<T>(weight), ptr<T>(bias),
        rows, cols, eps);
    MT_CUDA_CHECK_LAUNCH("layernorm_forward_kernel");
  });
}

void layernorm_backward(const Tensor& d_in, const Tensor& d_weight, const Tensor& d_bias,
                        const Tensor& d_out, const Tensor& in, const Tensor& weight,
                        const Tensor& mean, const Tensor& rstd) {
  use_device(d_in);
  const int64_t cols = weight.numel(), rows = leading_rows(in);
  if (rows == 0) return;
  dispatch_float(in.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    layernorm_backward_kernel<<<warp_rows_grid(rows), kBlockSize, 0, stream()>>>(
        ptr<T>(d_in), ptr<T>(d_out), ptr<T>(in), ptr<T>(weight), ptr<float>(mean), ptr<float>(rstd),
        rows, cols);
    MT_CUDA_CHECK_LAUNCH("layernorm_backward_kernel");
    accumulate_column_sums<T>(
        d_weight, rows, cols,
        NormalizedGrad<T>{ptr<T>(d_out), ptr<T>(in), ptr<float>(mean), ptr<float>(rstd), cols});
    accumulate_column_sums<T>(d_bias, rows, cols, MatrixValues<T>{ptr<T>(d_out), cols});
  });
}

}  // namespace meshtrain::ops::cuda
