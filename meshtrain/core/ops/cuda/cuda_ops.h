// CUDA implementations of the kernel set (see meshtrain/core/ops/op_list.inc): cuBLAS GEMMs (f32, bf16 with
// f32 accumulation) and hand-written kernels, launched on the calling thread's stream
// (cudaStreamPerThread). Called through meshtrain/core/ops/ops.h, which has already validated the arguments.
#pragma once

#include "meshtrain/core/ops/adamw_hyper.h"
#include "meshtrain/core/tensor.h"

namespace meshtrain::ops::cuda {
#include "meshtrain/core/ops/op_list.inc"
}  // namespace meshtrain::ops::cuda
