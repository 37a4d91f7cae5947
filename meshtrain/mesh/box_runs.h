// A box of a row-major tensor as contiguous runs of elements: how a slice is read from a flat file
// (safetensors, checkpoint shards) or produced by a counter-based generator without touching the
// rest of the tensor. Trailing dims the box covers whole merge into longer runs, so a dim-0 slice
// is one run.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "meshtrain/core/tensor.h"
#include "meshtrain/mesh/layout.h"

namespace meshtrain {

// fn(tensor_offset, box_offset, count): elements [tensor_offset, +count) of the flattened tensor
// are elements [box_offset, +count) of the flattened box. Runs come in increasing order; an empty
// box has none. InvalidArgument when the box does not fit inside `shape`.
void for_each_box_run(const Shape& shape, const TensorSlice& box,
                      const std::function<void(int64_t, int64_t, int64_t)>& fn);

// The overlap of two boxes of one tensor (empty shape entries when they do not meet).
TensorSlice intersect(const TensorSlice& a, const TensorSlice& b);
bool box_empty(const TensorSlice& box);

// Reads one global box into `out` (host, the box's shape, the local tensor's dtype).
using BoxReader = std::function<void(const TensorSlice& box, const Tensor& out)>;
// Fills `local` (host) box by box through `read`: how a rank's piece of a parameter comes from a
// source that knows only global coordinates.
void fill_from_boxes(const Tensor& local, const std::vector<LocalPiece>& pieces,
                     const BoxReader& read);

}  // namespace meshtrain
