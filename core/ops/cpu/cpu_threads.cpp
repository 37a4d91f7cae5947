// The CPU kernels' thread count: OpenMP's per-thread ICV plus OpenBLAS's process-wide count.
#include "core/ops/cpu/cpu_threads.h"

#include <cblas.h>
#include <omp.h>

#include <mutex>

#include "core/error.h"

namespace meshtrain::ops::cpu {

void set_cpu_threads(int threads) {
  MT_CHECK_GE(threads, 1, "set_cpu_threads: need at least one thread");
  omp_set_num_threads(threads);
  // OpenBLAS's count is process-wide: ranks of one process all set the same value (1), but they
  // may do it at once from their own threads, and the pthread build may resize its pool here.
  static std::mutex blas_mutex;
  std::lock_guard lock(blas_mutex);
  if (openblas_get_num_threads() != threads) openblas_set_num_threads(threads);
}

int cpu_threads() { return omp_get_max_threads(); }

}  // namespace meshtrain::ops::cpu
