// CPU implementations of the kernel set (see core/ops/op_list.inc). Called through core/ops/ops.h,
// which has already validated shapes, dtypes and devices.
#pragma once

#include "core/ops/adamw_hyper.h"
#include "core/tensor.h"

namespace meshtrain::ops::cpu {
#include "core/ops/op_list.inc"
}  // namespace meshtrain::ops::cpu
