// CUDA implementations of the kernel set (see core/ops/op_list.inc): cuBLAS GEMMs (f32, bf16 with
// f32 accumulation) and hand-written kernels, launched on the calling thread's stream
// (cudaStreamPerThread). Called through core/ops/ops.h, which has already validated the arguments.
#pragma once

#include "core/ops/adamw_hyper.h"
#include "core/tensor.h"

namespace meshtrain::ops::cuda {
#include "core/ops/op_list.inc"
}  // namespace meshtrain::ops::cuda
