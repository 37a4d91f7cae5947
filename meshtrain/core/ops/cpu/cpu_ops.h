// CPU implementations of the kernel set (see meshtrain/core/ops/op_list.inc). Called through meshtrain/core/ops/ops.h,
// which has already validated shapes, dtypes and devices.
#pragma once

#include "meshtrain/core/ops/adamw_hyper.h"
#include "meshtrain/core/tensor.h"

namespace meshtrain::ops::cpu {
#include "meshtrain/core/ops/op_list.inc"
}  // namespace meshtrain::ops::cpu
