// The kernels a GPT-2 training step needs, with their backward passes. Each entry point checks
// shapes, dtypes and devices, then dispatches to the CPU (OpenBLAS) or CUDA (cuBLAS) implementation.
#pragma once

#include "meshtrain/core/ops/adamw_hyper.h"
#include "meshtrain/core/tensor.h"

namespace meshtrain::ops {
#include "meshtrain/core/ops/op_list.inc"
}  // namespace meshtrain::ops
