// CPU implementations of the kernel set (see core/ops/op_list.inc). Called through core/ops/ops.h,
// which has already validated shapes, dtypes and devices.
#pragma once

#include "core/ops/adamw_hyper.h"
#include "core/tensor.h"

namespace meshtrain::ops::cpu {
#include "core/ops/op_list.inc"

// OpenBLAS threads per call. Ranks sharing a process each run single-threaded BLAS so that they
// do not oversubscribe the cores.
void set_blas_threads(int threads);
}  // namespace meshtrain::ops::cpu
