// How the GEMM helpers (blas.h) use the calling thread's CPU threads: the output c[m, n] is cut
// along its longer side into blocks of whole kAlign rows or columns, and each block is a GEMM of
// its own, run single-threaded by the library; the threads share out the blocks. The cut depends
// on the shape alone, never on the thread count: OpenBLAS's result for an element depends on the
// size of the call that computes it (its kernels for the edge rows sum in another order), so a
// cut that followed the threads would make a run's numbers depend on the machine's cores. A small
// GEMM is one block; inside a parallel part (attention's per-head products) the blocks run one
// after another on the calling thread.
#pragma once

#include <algorithm>
#include <cstdint>

#include "meshtrain/core/ops/cpu/parallel.h"

namespace meshtrain::ops::cpu {

// block(i0, i1, j0, j1): the GEMM restricted to rows [i0, i1) and columns [j0, j1) of c.
template <typename Block>
void for_gemm_blocks(int64_t m, int64_t n, int64_t k, Block&& block) {
  constexpr int64_t kAlign = 16;
  // Below about a million multiply-adds a block, waking a worker costs more than it saves.
  constexpr int64_t kMinWorkPerBlock = int64_t{1} << 20;
  // Enough blocks to share among 16 threads evenly, few enough that each call's packing of the
  // other operand stays a small part of it (measured on OpenBLAS: 8 to 16 blocks of a GPT-2-small
  // GEMM ran no slower than one call, 64 ran 30% slower).
  constexpr int64_t kMaxBlocks = 16;
  const bool by_rows = m >= n;
  const int64_t extent = by_rows ? m : n;
  const int64_t units = (extent + kAlign - 1) / kAlign;
  const int64_t work = m * n * std::max<int64_t>(k, 1);
  const int64_t blocks = std::clamp<int64_t>(work / kMinWorkPerBlock, 1, std::min(units, kMaxBlocks));
  for_blocks(blocks, 1, [&](int64_t b, int64_t, int64_t) {
    const int64_t lo = units * b / blocks * kAlign;
    const int64_t hi = std::min(units * (b + 1) / blocks * kAlign, extent);
    if (by_rows)
      block(lo, hi, int64_t{0}, n);
    else
      block(int64_t{0}, m, lo, hi);
  });
}

}  // namespace meshtrain::ops::cpu
