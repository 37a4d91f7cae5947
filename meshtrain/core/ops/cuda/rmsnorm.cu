// RMSNorm over the last dim (Llama's normalisation: no mean, no bias): one warp per row for the
// reciprocal RMS and d_in, and deterministic column sums for d_weight.
#include "meshtrain/core/ops/cuda/cuda_ops.h"
#include "meshtrain/core/ops/cuda/kernel_utils.cuh"

namespace meshtrain::ops::cuda {

namespace {

template <typename T>
__global__ void rmsnorm_forward_kernel(T* out, float* rstd, const T* in, const T* weight,
                                       int64_t rows, int64_t cols, float eps) {
  const int64_t row = warp_row();
  if (row >= rows) return;
  const int lane = threadIdx.x % 32;
  const T* x = in + row * cols;
  float sq = 0.0f;
  for (int64_t c = lane; c < cols; c += 32) sq += as_float(x[c]) * as_float(x[c]);
  const float s = 1.0f / sqrtf(warp_sum(sq) / static_cast<float>(cols) + eps);
  T* y = out + row * cols;
  for (int64_t c = lane; c < cols; c += 32)
    y[c] = from_float<T>(as_float(x[c]) * s * as_float(weight[c]));
  if (lane == 0) rstd[row] = s;
}

// d_in = rstd * (g - xhat * mean(g * xhat)) with g = d_out * weight, xhat = in * rstd.
template <typename T>
__global__ void rmsnorm_backward_kernel(T* d_in, const T* d_out, const T* in, const T* weight,
                                        const float* rstd, int64_t rows, int64_t cols) {
  const int64_t row = warp_row();
  if (row >= rows) return;
  const int lane = threadIdx.x % 32;
  const T* x = in + row * cols;
  const T* dy = d_out + row * cols;
  const float s = rstd[row];
  float g_xhat_sum = 0.0f;
  for (int64_t c = lane; c < cols; c += 32)
    g_xhat_sum += as_float(dy[c]) * as_float(weight[c]) * as_float(x[c]) * s;
  const float g_xhat_mean = warp_sum(g_xhat_sum) / static_cast<float>(cols);
  T* dx = d_in + row * cols;
  for (int64_t c = lane; c < cols; c += 32) {
    const float xhat = as_float(x[c]) * s;
    dx[c] = from_float<T>(s * (as_float(dy[c]) * as_float(weight[c]) - xhat * g_xhat_mean));
  }
}

// d_weight's column-sum term: d_out * xhat.
template <typename T>
struct NormalizedGrad {
  const T* d_out;
  const T* in;
  const float* rstd;
  int64_t cols;
  __device__ float operator()(int64_t r, int64_t c) const {
    const int64_t i = r * cols + c;
    return as_float(d_out[i]) * as_float(in[i]) * rstd[r];
  }
};

}  // namespace

void rmsnorm_forward(const Tensor& out, const Tensor& rstd, const Tensor& in, const Tensor& weight,
                     float eps) {
  use_device(out);
  const int64_t cols = weight.numel(), rows = leading_rows(in);
  if (rows == 0) return;
  dispatch_float(in.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    rmsnorm_forward_kernel<<<warp_rows_grid(rows), kBlockSize, 0, stream()>>>(
        ptr<T>(out), ptr<float>(rstd), ptr<T>(in), ptr<T>(weight), rows, cols, eps);
    MT_CUDA_CHECK_LAUNCH("rmsnorm_forward_kernel");
  });
}

void rmsnorm_backward(const Tensor& d_in, const Tensor& d_weight, const Tensor& d_out,
                      const Tensor& in, const Tensor& weight, const Tensor& rstd) {
  use_device(d_in);
  const int64_t cols = weight.numel(), rows = leading_rows(in);
  if (rows == 0) return;
  dispatch_float(in.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    rmsnorm_backward_kernel<<<warp_rows_grid(rows), kBlockSize, 0, stream()>>>(
        ptr<T>(d_in), ptr<T>(d_out), ptr<T>(in), ptr<T>(weight), ptr<float>(rstd), rows, cols);
    MT_CUDA_CHECK_LAUNCH("rmsnorm_backward_kernel");
    if (d_weight.defined())  // undefined: a frozen weight
      accumulate_column_sums<T>(
          d_weight, rows, cols,
          NormalizedGrad<T>{ptr<T>(d_out), ptr<T>(in), ptr<float>(rstd), cols});
  });
}

}  // namespace meshtrain::ops::cuda
