// Softmax cross-entropy over one rank's slice of the vocabulary, in f32. The row-wise reductions
// take one block per row (rows are long: the vocabulary); backward, whose row statistics are given,
// is elementwise. Targets outside the slice belong to another rank: they pick no logit here.
#include "meshtrain/core/ops/cuda/cuda_ops.h"
#include "meshtrain/core/ops/cuda/kernel_utils.cuh"

namespace meshtrain::ops::cuda {

namespace {

constexpr int kRowBlock = 512;

// The column of a target inside the slice [vocab_start, vocab_start + vocab), or -1.
__device__ __forceinline__ int64_t slice_column(int32_t target, int64_t vocab_start,
                                                int64_t vocab) {
  const int64_t column = target - vocab_start;
  return column >= 0 && column < vocab ? column : -1;
}

template <typename T>
__global__ void row_max_kernel(float* row_max, const T* logits, int64_t vocab) {
  const T* x = logits + blockIdx.x * vocab;
  float max = -INFINITY;
  for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x) max = fmaxf(max, as_float(x[v]));
  max = block_max(max);
  if (threadIdx.x == 0) row_max[blockIdx.x] = max;
}

template <typename T>
__global__ void partials_kernel(float* sum_exp, float* target_logit, const T* logits,
                                const int32_t* targets, const float* row_max, int64_t vocab,
                                int64_t vocab_start) {
  const T* x = logits + blockIdx.x * vocab;
  const float max = row_max[blockIdx.x];
  float sum = 0.0f;
  for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x) sum += expf(as_float(x[v]) - max);
  sum = block_sum(sum);
  if (threadIdx.x == 0) {
    sum_exp[blockIdx.x] = sum;
    const int64_t column = slice_column(targets[blockIdx.x], vocab_start, vocab);
    target_logit[blockIdx.x] = column >= 0 ? as_float(x[column]) : 0.0f;
  }
}

template <typename T>
struct SoftmaxMinusOnehot {
  T* d_logits;
  const T* logits;
  const int32_t* targets;
  const float* row_max;
  const float* sum_exp;
  int64_t vocab;
  int64_t vocab_start;
  float scale;
  __device__ void operator()(int64_t i) const {
    const int64_t n = i / vocab;
    float g = expf(as_float(logits[i]) - row_max[n]) / sum_exp[n];
    if (i % vocab == slice_column(targets[n], vocab_start, vocab)) g -= 1.0f;
    d_logits[i] = from_float<T>(scale * g);
  }
};

}  // namespace

void cross_entropy_row_max(const Tensor& row_max, const Tensor& logits) {
  use_device(row_max);
  const int64_t rows = row_max.numel(), vocab = logits.dim(-1);
  if (rows == 0) return;
  dispatch_float(logits.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    row_max_kernel<<<static_cast<unsigned>(rows), kRowBlock, 0, stream()>>>(ptr<float>(row_max),
                                                                            ptr<T>(logits), vocab);
    MT_CUDA_CHECK_LAUNCH("row_max_kernel");
  });
}

void cross_entropy_partials(const Tensor& sum_exp, const Tensor& target_logit, const Tensor& logits,
                            const Tensor& targets, const Tensor& row_max, int64_t vocab_start) {
  use_device(sum_exp);
  const int64_t rows = targets.numel(), vocab = logits.dim(-1);
  if (rows == 0) return;
  dispatch_float(logits.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    partials_kernel<<<static_cast<unsigned>(rows), kRowBlock, 0, stream()>>>(
        ptr<float>(sum_exp), ptr<float>(target_logit), ptr<T>(logits), ptr<int32_t>(targets),
        ptr<float>(row_max), vocab, vocab_start);
    MT_CUDA_CHECK_LAUNCH("partials_kernel");
  });
}

void cross_entropy_backward(const Tensor& d_logits, const Tensor& logits, const Tensor& targets,
                            const Tensor& row_max, const Tensor& sum_exp, int64_t vocab_start,
                            float scale) {
  use_device(d_logits);
  const int64_t vocab = logits.dim(-1);
  dispatch_float(logits.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_elementwise(
        logits.numel(),
        SoftmaxMinusOnehot<T>{ptr<T>(d_logits), ptr<T>(logits), ptr<int32_t>(targets),
                              ptr<float>(row_max), ptr<float>(sum_exp), vocab, vocab_start, scale});
  });
}

}  // namespace meshtrain::ops::cuda
