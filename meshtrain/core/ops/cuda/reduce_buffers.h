// Element-wise reduction of equally long device buffers, for the local backend's collectives on
// CUDA tensors (the host version is meshtrain/core/comm/local/reduce.h, whose results it matches bit for bit:
// the same rank order, f32 accumulation for bf16, 64-bit sums for i32).
#pragma once

#include <cstdint>

#include "meshtrain/core/comm/types.h"
#include "meshtrain/core/dtype.h"

namespace meshtrain::ops::cuda {

// The most buffers one reduction takes (their addresses travel as a kernel argument).
inline constexpr int kMaxReduceSources = 64;

// dst[i] = op over k < count of srcs[k][i], on the calling thread's stream of `device`; every
// pointer is memory of that device. dst may be one of srcs.
void reduce_buffers(int device, void* dst, const void* const* srcs, int count, int64_t n,
                    DType dtype, ReduceOp op);

}  // namespace meshtrain::ops::cuda
