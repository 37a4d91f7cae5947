// Copies between a global host tensor and one rank's local tensor under a Layout, box by box
// through the rank's pieces (Layout::local_pieces): how a full checkpoint or a Hugging Face weight
// becomes a rank's piece, and how the pieces of all ranks assemble the full tensor again.
#pragma once

#include <vector>

#include "meshtrain/core/tensor.h"
#include "meshtrain/mesh/layout.h"

namespace meshtrain {

// Fills `local` from `global`, one piece at a time. Same dtype, host tensors; throws
// InvalidArgument when a piece falls outside either tensor or the pieces do not fill `local`.
void copy_global_to_local(const Tensor& local, const Tensor& global,
                          const std::vector<LocalPiece>& pieces);
// Writes `local` into its boxes of `global`; the rest of `global` is left as it was.
void copy_local_to_global(const Tensor& global, const Tensor& local,
                          const std::vector<LocalPiece>& pieces);

}  // namespace meshtrain
