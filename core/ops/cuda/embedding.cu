// Token embedding: a row gather forward, a scatter-add backward (atomics: ids repeat).
#include "core/ops/cuda/cuda_ops.h"
#include "core/ops/cuda/kernel_utils.cuh"

namespace meshtrain::ops::cuda {

namespace {

template <typename T>
struct Gather {
  T* out;
  const int32_t* ids;
  const T* table;
  int64_t cols;
  __device__ void operator()(int64_t i) const { out[i] = table[ids[i / cols] * cols + i % cols]; }
};

// Adds in f32 for f32 tables; bf16 tables take bf16 atomics (rounded at every add, in any order).
template <typename T>
struct ScatterAdd {
  T* d_table;
  const T* d_out;
  const int32_t* ids;
  int64_t cols;
  __device__ void operator()(int64_t i) const {
    atomicAdd(d_table + ids[i / cols] * cols + i % cols, d_out[i]);
  }
};

}  // namespace

void embedding_forward(const Tensor& out, const Tensor& ids, const Tensor& table) {
  use_device(out);
  const int64_t cols = table.dim(1);
  dispatch_float(table.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_elementwise(out.numel(), Gather<T>{ptr<T>(out), ptr<int32_t>(ids), ptr<T>(table), cols});
  });
}

void embedding_backward(const Tensor& d_table, const Tensor& d_out, const Tensor& ids) {
  use_device(d_table);
  const int64_t cols = d_table.dim(1);
  dispatch_float(d_table.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_elementwise(d_out.numel(),
                       ScatterAdd<T>{ptr<T>(d_table), ptr<T>(d_out), ptr<int32_t>(ids), cols});
  });
}

}  // namespace meshtrain::ops::cuda
