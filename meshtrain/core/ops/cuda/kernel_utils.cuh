// Device-side building blocks of the CUDA kernels (private to meshtrain/core/ops/cuda): element types,
// dtype dispatch, grid-stride launches, warp and block reductions, column sums, scratch memory.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "meshtrain/core/bf16.h"
#include "meshtrain/core/error.h"
#include "meshtrain/core/ops/cuda/cuda_check.h"
#include "meshtrain/core/tensor.h"

namespace meshtrain::ops::cuda {

using bf16 = __nv_bfloat16;  // bit-compatible with meshtrain::BF16
static_assert(sizeof(bf16) == sizeof(BF16));

// Loads widen to f32 and stores round to nearest even: all arithmetic happens in f32.
__device__ __forceinline__ float as_float(float x) { return x; }
__device__ __forceinline__ float as_float(bf16 x) { return __bfloat162float(x); }
template <typename T>
__device__ __forceinline__ T from_float(float x) {
  if constexpr (std::is_same_v<T, bf16>) {
    return __float2bfloat16_rn(x);
  } else {
    return x;
  }
}

// The tensor's data as a device element pointer; data<T>() checks the dtype.
template <typename T>
T* ptr(const Tensor& t) {
  if constexpr (std::is_same_v<T, bf16>) {
    return reinterpret_cast<bf16*>(t.data<BF16>());
  } else {
    return t.data<T>();
  }
}

// Calls fn(Tag<float>{}) or fn(Tag<bf16>{}) for a compute dtype; the lambda reads the element type
// as `typename decltype(tag)::type`.
template <typename T>
struct Tag {
  using type = T;
};
template <typename Fn>
void dispatch_float(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::f32:
      fn(Tag<float>{});
      return;
    case DType::bf16:
      fn(Tag<bf16>{});
      return;
    default:
      throw NotSupported(
          detail::concat("CUDA kernels compute on f32 or bf16, got ", dtype_name(dtype)));
  }
}

constexpr int kBlockSize = 256;
constexpr int kWarpsPerBlock = kBlockSize / 32;

// Enough blocks to cover n threads of kBlockSize, capped; kernels stride over the rest.
inline unsigned grid_size(int64_t n) {
  return static_cast<unsigned>(std::clamp<int64_t>((n + kBlockSize - 1) / kBlockSize, 1, 1 << 20));
}

template <typename Body>
__global__ void elementwise_kernel(int64_t n, Body body) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    body(i);
}

// Runs body(i) for every i in [0, n); body is a functor with a __device__ operator().
template <typename Body>
void launch_elementwise(int64_t n, const Body& body) {
  if (n == 0) return;
  elementwise_kernel<<<grid_size(n), kBlockSize, 0, stream()>>>(n, body);
  MT_CUDA_CHECK_LAUNCH("elementwise_kernel");
}

// One warp per row: the kernels below launch rows / kWarpsPerBlock blocks of kBlockSize.
inline unsigned warp_rows_grid(int64_t rows) {
  return static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
}
__device__ __forceinline__ int64_t warp_row() {
  return blockIdx.x * int64_t{kWarpsPerBlock} + threadIdx.x / 32;
}

template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int offset = 16; offset > 0; offset /= 2)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Block-wide reductions for blockDim.x a multiple of 32; every thread gets the result. The
// leading barrier lets a block call them back to back.
template <typename T>
__device__ T block_sum(T v) {
  __shared__ T partial[32];
  v = warp_sum(v);
  __syncthreads();
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
  __syncthreads();
  v = threadIdx.x < blockDim.x / 32 ? partial[threadIdx.x % 32] : T{0};
  return warp_sum(v);
}
__device__ inline float block_max(float v) {
  __shared__ float partial[32];
  v = warp_max(v);
  __syncthreads();
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
  __syncthreads();
  v = threadIdx.x < blockDim.x / 32 ? partial[threadIdx.x % 32] : -INFINITY;
  return warp_max(v);
}

// The plain values of a row-major [rows, cols] matrix, as a column-sum term.
template <typename T>
struct MatrixValues {
  const T* x;
  int64_t cols;
  __device__ float operator()(int64_t r, int64_t c) const { return as_float(x[r * cols + c]); }
};

// Temporary device memory for one kernel call, from the caching allocator like any tensor
// (meshtrain/core/device_block_cache.h): reused in this thread's stream order, never synchronising on free,
// and charged to the rank's tracker under the current category.
class Scratch {
 public:
  // `bytes` on the device of `like` (an argument of the kernel).
  Scratch(const Tensor& like, size_t bytes) {
    if (bytes == 0) return;
    const auto words = static_cast<int64_t>((bytes + sizeof(float) - 1) / sizeof(float));
    buffer_ = Tensor::empty({words}, DType::f32, like.device());
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;

  template <typename T>
  T* as() const {
    return buffer_.defined() ? static_cast<T*>(buffer_.raw_data()) : nullptr;
  }

 private:
  Tensor buffer_;
};

// dst[c] += sum over r < rows of term(r, c) (bias and LayerNorm gradients: thousands of rows,
// hundreds of columns). Blocks of 32 columns x kColumnSumRows threads (coalesced reads along a
// row) each sum one slab of rows, so that a long column spreads over the whole GPU; a second
// kernel adds the slabs' partial sums in slab order. Slabs depend on the row count alone, so the
// result is deterministic.
constexpr int kColumnSumRows = 32;
constexpr int64_t kColumnSlabRows = 256;    // 8 rows per thread
constexpr int64_t kMaxColumnSlabs = 65535;  // gridDim.y

// One slab's sums: added into dst when there is one slab, else written to partial[slab][c].
template <typename Dst, typename Term>
__global__ void column_slab_sum_kernel(Dst* dst, float* partial, int64_t rows, int64_t cols,
                                       int64_t slab_rows, Term term) {
  __shared__ float sums[kColumnSumRows][33];  // padded against bank conflicts
  const int64_t c = blockIdx.x * int64_t{32} + threadIdx.x;
  const int64_t begin = blockIdx.y * slab_rows;
  const int64_t end = begin + slab_rows < rows ? begin + slab_rows : rows;
  float sum = 0.0f;
  if (c < cols)
    for (int64_t r = begin + threadIdx.y; r < end; r += kColumnSumRows) sum += term(r, c);
  sums[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y != 0 || c >= cols) return;
  float total = 0.0f;
  for (int y = 0; y < kColumnSumRows; ++y) total += sums[y][threadIdx.x];
  if (gridDim.y == 1)
    dst[c] = from_float<Dst>(as_float(dst[c]) + total);
  else
    partial[blockIdx.y * cols + c] = total;
}

template <typename Dst>
__global__ void add_column_slabs_kernel(Dst* dst, const float* partial, int64_t slabs,
                                        int64_t cols) {
  for (int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; c < cols;
       c += int64_t{gridDim.x} * blockDim.x) {
    float total = 0.0f;
    for (int64_t s = 0; s < slabs; ++s) total += partial[s * cols + c];
    dst[c] = from_float<Dst>(as_float(dst[c]) + total);
  }
}

template <typename Dst, typename Term>
void accumulate_column_sums(const Tensor& dst_tensor, int64_t rows, int64_t cols,
                            const Term& term) {
  if (cols == 0 || rows == 0) return;
  Dst* dst = ptr<Dst>(dst_tensor);
  const int64_t slab_rows =
      std::max(kColumnSlabRows, (rows + kMaxColumnSlabs - 1) / kMaxColumnSlabs);
  const int64_t slabs = (rows + slab_rows - 1) / slab_rows;
  Scratch partial(dst_tensor, slabs > 1 ? static_cast<size_t>(slabs * cols) * sizeof(float) : 0);
  const dim3 grid(static_cast<unsigned>((cols + 31) / 32), static_cast<unsigned>(slabs));
  const dim3 block(32, kColumnSumRows);
  column_slab_sum_kernel<<<grid, block, 0, stream()>>>(dst, partial.as<float>(), rows, cols,
                                                       slab_rows, term);
  MT_CUDA_CHECK_LAUNCH("column_slab_sum_kernel");
  if (slabs == 1) return;
  add_column_slabs_kernel<<<grid_size(cols), kBlockSize, 0, stream()>>>(dst, partial.as<float>(),
                                                                        slabs, cols);
  MT_CUDA_CHECK_LAUNCH("add_column_slabs_kernel");
}

// Rows of a row-major tensor whose last dim is the row: the product of the leading dims (also
// when the last dim is 0).
inline int64_t leading_rows(const Tensor& t) {
  int64_t rows = 1;
  for (int i = 0; i + 1 < t.ndim(); ++i) rows *= t.shape()[static_cast<size_t>(i)];
  return rows;
}

}  // namespace meshtrain::ops::cuda
