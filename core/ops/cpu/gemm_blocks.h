// How the GEMM helpers (blas.h) use the calling thread's CPU threads: the output c[m, n] is cut
// along its longer side into blocks of whole kAlign rows or columns, one per thread, and each
// block is a GEMM of its own, run single-threaded by the library. Small GEMMs, and GEMMs called
// from inside a parallel part (attention's per-head products), run whole on the calling thread.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/ops/cpu/parallel.h"

namespace meshtrain::ops::cpu {

// block(i0, i1, j0, j1): the GEMM restricted to rows [i0, i1) and columns [j0, j1) of c.
template <typename Block>
void for_gemm_blocks(int64_t m, int64_t n, int64_t k, Block&& block) {
  constexpr int64_t kAlign = 16;
  // Below about a million multiply-adds per thread, waking a worker costs more than it saves.
  constexpr int64_t kMinWorkPerThread = int64_t{1} << 20;
  const bool by_rows = m >= n;
  const int64_t extent = by_rows ? m : n;
  const int64_t units = (extent + kAlign - 1) / kAlign;
  const int64_t unit_work = std::max<int64_t>(kAlign * (by_rows ? n : m) * k, 1);
  parallel_for(units, std::max<int64_t>(kMinWorkPerThread / unit_work, 1),
               [&](int64_t u0, int64_t u1) {
                 const int64_t lo = u0 * kAlign, hi = std::min(u1 * kAlign, extent);
                 if (by_rows)
                   block(lo, hi, int64_t{0}, n);
                 else
                   block(int64_t{0}, m, lo, hi);
               });
}

}  // namespace meshtrain::ops::cpu
