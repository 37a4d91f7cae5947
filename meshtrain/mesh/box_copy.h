// Copies a box (a sub-block) between two contiguous host tensors of the same dtype and rank: the
// packing and unpacking step of redistributions along dims other than 0.
#pragma once

#include "meshtrain/core/tensor.h"

namespace meshtrain {

// dst[dst_offset + i] = src[src_offset + i] for every index i inside `extent`.
void copy_box(const Tensor& dst, const Shape& dst_offset, const Tensor& src,
              const Shape& src_offset, const Shape& extent);

}  // namespace meshtrain
