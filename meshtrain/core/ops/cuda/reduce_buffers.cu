#include "meshtrain/core/ops/cuda/reduce_buffers.h"

#include "meshtrain/core/ops/cuda/kernel_utils.cuh"

namespace meshtrain::ops::cuda {

namespace {

struct Sources {
  const void* ptr[kMaxReduceSources];
};

// The accumulator of each element type, as the host reduction has it.
template <typename T>
struct Accumulate {
  using Acc = float;
  __device__ static Acc load(T v) { return as_float(v); }
  __device__ static T store(Acc a) { return from_float<T>(a); }
};
template <>
struct Accumulate<int32_t> {
  using Acc = long long;
  __device__ static Acc load(int32_t v) { return v; }
  __device__ static int32_t store(Acc a) { return static_cast<int32_t>(a); }
};

template <typename T>
__global__ void reduce_kernel(T* dst, Sources srcs, int count, int64_t n, ReduceOp op) {
  using A = Accumulate<T>;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    typename A::Acc acc = A::load(static_cast<const T*>(srcs.ptr[0])[i]);
    for (int k = 1; k < count; ++k) {
      const typename A::Acc v = A::load(static_cast<const T*>(srcs.ptr[k])[i]);
      acc = op == ReduceOp::max ? (v > acc ? v : acc) : acc + v;
    }
    if (op == ReduceOp::avg) acc /= static_cast<typename A::Acc>(count);
    dst[i] = A::store(acc);
  }
}

template <typename T>
void launch(void* dst, const Sources& srcs, int count, int64_t n, ReduceOp op) {
  reduce_kernel<T><<<grid_size(n), kBlockSize, 0, stream()>>>(static_cast<T*>(dst), srcs, count, n,
                                                              op);
  MT_CUDA_CHECK_LAUNCH("reduce_kernel");
}

}  // namespace

void reduce_buffers(int device, void* dst, const void* const* srcs, int count, int64_t n,
                    DType dtype, ReduceOp op) {
  MT_CHECK(count >= 1 && count <= kMaxReduceSources, "reduce_buffers: between 1 and ",
           kMaxReduceSources, " device buffers per reduction, got ", count);
  if (n == 0) return;
  MT_CUDA_CHECK(cudaSetDevice(device));
  Sources sources{};
  for (int k = 0; k < count; ++k) sources.ptr[k] = srcs[k];
  switch (dtype) {
    case DType::f32: return launch<float>(dst, sources, count, n, op);
    case DType::bf16: return launch<bf16>(dst, sources, count, n, op);
    case DType::i32: return launch<int32_t>(dst, sources, count, n, op);
  }
}

}  // namespace meshtrain::ops::cuda
