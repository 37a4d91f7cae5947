// Softmax cross-entropy, one block per row (rows are long: the vocabulary), through a stable
// log-sum-exp computed in f32. A target outside [0, V) cannot be reported from the device without
// a sync, so its row gets NaN (loss and gradient) instead of an out-of-bounds read.
#include "core/ops/cuda/cuda_ops.h"
#include "core/ops/cuda/kernel_utils.cuh"

namespace meshtrain::ops::cuda {

namespace {

// log(sum(exp(x))) over one row, shifted by the maximum; every thread of the block gets it.
template <typename T>
__device__ float block_log_sum_exp(const T* x, int64_t vocab) {
  float max = -INFINITY;
  for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x) max = fmaxf(max, as_float(x[v]));
  max = block_max(max);
  float sum = 0.0f;
  for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x) sum += expf(as_float(x[v]) - max);
  return max + logf(block_sum(sum));
}

template <typename T>
__global__ void cross_entropy_forward_kernel(float* losses, const T* logits, const int32_t* targets,
                                             int64_t vocab) {
  const T* x = logits + blockIdx.x * vocab;
  const float lse = block_log_sum_exp(x, vocab);
  const int64_t target = targets[blockIdx.x];
  if (threadIdx.x == 0)
    losses[blockIdx.x] = target >= 0 && target < vocab ? lse - as_float(x[target]) : NAN;
}

template <typename T>
__global__ void cross_entropy_backward_kernel(T* d_logits, const T* logits, const int32_t* targets,
                                              int64_t vocab, float scale) {
  const T* x = logits + blockIdx.x * vocab;
  T* dx = d_logits + blockIdx.x * vocab;
  const float lse = block_log_sum_exp(x, vocab);
  const int64_t target = targets[blockIdx.x];
  const bool valid = target >= 0 && target < vocab;
  for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x) {
    const float p = expf(as_float(x[v]) - lse);
    dx[v] = from_float<T>(valid ? scale * (v == target ? p - 1.0f : p) : NAN);
  }
}

constexpr int kRowBlock = 512;

}  // namespace

void cross_entropy_forward(const Tensor& losses, const Tensor& logits, const Tensor& targets) {
  use_device(losses);
  const int64_t rows = targets.numel(), vocab = logits.dim(-1);
  if (rows == 0) return;
  dispatch_float(logits.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    cross_entropy_forward_kernel<<<static_cast<unsigned>(rows), kRowBlock, 0, stream()>>>(
        ptr<float>(losses), ptr<T>(logits), ptr<int32_t>(targets), vocab);
    MT_CUDA_CHECK_LAUNCH("cross_entropy_forward_kernel");
  });
}

void cross_entropy_backward(const Tensor& d_logits, const Tensor& logits, const Tensor& targets,
                            float scale) {
  use_device(d_logits);
  const int64_t rows = targets.numel(), vocab = logits.dim(-1);
  if (rows == 0) return;
  dispatch_float(logits.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    cross_entropy_backward_kernel<<<static_cast<unsigned>(rows), kRowBlock, 0, stream()>>>(
        ptr<T>(d_logits), ptr<T>(logits), ptr<int32_t>(targets), vocab, scale);
    MT_CUDA_CHECK_LAUNCH("cross_entropy_backward_kernel");
  });
}

}  // namespace meshtrain::ops::cuda
