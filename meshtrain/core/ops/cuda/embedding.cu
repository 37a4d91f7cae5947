// Token embedding on one rank's slice of the vocabulary: a row gather forward, a scatter-add
// backward (atomics: ids repeat). Ids outside the slice belong to another rank's rows: they read
// zeros and add nothing.
#include "meshtrain/core/ops/cuda/cuda_ops.h"
#include "meshtrain/core/ops/cuda/kernel_utils.cuh"

namespace meshtrain::ops::cuda {

namespace {

// The table row of an id inside the slice [vocab_start, vocab_start + vocab), or -1.
__device__ __forceinline__ int64_t slice_row(int32_t id, int64_t vocab_start, int64_t vocab) {
  const int64_t row = id - vocab_start;
  return row >= 0 && row < vocab ? row : -1;
}

template <typename T>
struct Gather {
  T* out;
  const int32_t* ids;
  const T* table;
  int64_t vocab;
  int64_t cols;
  int64_t vocab_start;
  __device__ void operator()(int64_t i) const {
    const int64_t row = slice_row(ids[i / cols], vocab_start, vocab);
    out[i] = row >= 0 ? table[row * cols + i % cols] : from_float<T>(0.0f);
  }
};

// Adds in f32 for f32 tables; bf16 tables take bf16 atomics (rounded at every add, in any order).
template <typename T>
struct ScatterAdd {
  T* d_table;
  const T* d_out;
  const int32_t* ids;
  int64_t vocab;
  int64_t cols;
  int64_t vocab_start;
  __device__ void operator()(int64_t i) const {
    const int64_t row = slice_row(ids[i / cols], vocab_start, vocab);
    if (row >= 0) atomicAdd(d_table + row * cols + i % cols, d_out[i]);
  }
};

}  // namespace

void embedding_forward(const Tensor& out, const Tensor& ids, const Tensor& table,
                       int64_t vocab_start) {
  use_device(out);
  const int64_t vocab = table.dim(0), cols = table.dim(1);
  dispatch_float(table.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_elementwise(out.numel(), Gather<T>{ptr<T>(out), ptr<int32_t>(ids), ptr<T>(table), vocab,
                                              cols, vocab_start});
  });
}

void embedding_backward(const Tensor& d_table, const Tensor& d_out, const Tensor& ids,
                        int64_t vocab_start) {
  use_device(d_table);
  const int64_t vocab = d_table.dim(0), cols = d_table.dim(1);
  dispatch_float(d_table.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_elementwise(d_out.numel(), ScatterAdd<T>{ptr<T>(d_table), ptr<T>(d_out),
                                                    ptr<int32_t>(ids), vocab, cols, vocab_start});
  });
}

}  // namespace meshtrain::ops::cuda
