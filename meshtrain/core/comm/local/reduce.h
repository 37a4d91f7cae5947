// Element-wise reduction of several equally long buffers, as the local backend's reductions use it.
#pragma once

#include <cstdint>

#include "meshtrain/core/comm/types.h"
#include "meshtrain/core/dtype.h"

namespace meshtrain::local {

// dst[i] = op over k < count of srcs[k][i], for n elements, summed in rank order so every run
// gives the same bits. bf16 accumulates in f32 and rounds once; avg is sum / count; i32 sums in
// 64 bits and has no avg. dst may be one of srcs (it is read block by block before being written).
void reduce_into(void* dst, const void* const* srcs, int count, int64_t n, DType dtype,
                 ReduceOp op);

}  // namespace meshtrain::local
