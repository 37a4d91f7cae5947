// Row and block parallelism for the CPU kernels, on the calling thread's count (set_cpu_threads)
// and workers (run_on_threads).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "meshtrain/core/ops/cpu/cpu_threads.h"

namespace meshtrain::ops::cpu {

// body(begin, end) over [0, count) in at most cpu_threads() contiguous chunks of at least `grain`
// items (run_on_threads); one chunk, on the calling thread, when the work is too small to share or
// when called from inside a chunk. Chunk bounds change with the thread count, so body's results
// must not depend on them (row-wise or element-wise work); sums over many items use fixed blocks
// instead (for_blocks).
template <typename Body>
void parallel_for(int64_t count, int64_t grain, Body&& body) {
  if (count <= 0) return;
  const int64_t chunks =
      std::min<int64_t>(cpu_threads(), std::max<int64_t>(count / std::max<int64_t>(grain, 1), 1));
  if (chunks <= 1) {
    body(int64_t{0}, count);
    return;
  }
  struct Job {
    Body& body;
    int64_t count, chunks;
  } job{body, count, chunks};
  run_on_threads(
      static_cast<int>(chunks),
      [](void* context, int c) {
        Job& j = *static_cast<Job*>(context);
        j.body(j.count * c / j.chunks, j.count * (c + 1) / j.chunks);
      },
      &job);
}

// body(block, begin, end) for the fixed blocks [block * size, min((block + 1) * size, count)):
// the blocks, and so any per-block partial sums, do not depend on the thread count.
template <typename Body>
void for_blocks(int64_t count, int64_t size, Body&& body) {
  const int64_t blocks = (count + size - 1) / size;
  parallel_for(blocks, 1, [&](int64_t first, int64_t last) {
    for (int64_t b = first; b < last; ++b) body(b, b * size, std::min(count, (b + 1) * size));
  });
}

// A buffer of the calling thread that kernels reuse from call to call (grown, never shrunk), so
// that scratch space costs no allocation on the hot path. `slot` keeps apart buffers that one
// kernel uses at the same time.
template <typename T>
T* thread_scratch(size_t count, int slot = 0) {
  thread_local std::vector<T> buffers[2];
  std::vector<T>& buffer = buffers[slot];
  if (buffer.size() < count) buffer.resize(count);
  return buffer.data();
}

}  // namespace meshtrain::ops::cpu
