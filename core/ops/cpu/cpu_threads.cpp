// The CPU kernels' thread count: OpenMP's per-thread ICV plus OpenBLAS's process-wide count.
#include "core/ops/cpu/cpu_threads.h"

#include <cblas.h>
#include <omp.h>

#include <mutex>

#include "core/error.h"

namespace meshtrain::ops::cpu {

namespace {
// OpenBLAS's count is process-wide: ranks of one process all set the same value (1), but they
// may do it at once from their own threads, and the pthread build may resize its pool here.
std::mutex blas_mutex;

int exchange_blas_threads(int threads) {
  std::lock_guard lock(blas_mutex);
  const int before = openblas_get_num_threads();
  if (before != threads) openblas_set_num_threads(threads);
  return before;
}
}  // namespace

void set_cpu_threads(int threads) {
  MT_CHECK_GE(threads, 1, "set_cpu_threads: need at least one thread");
  omp_set_num_threads(threads);
  exchange_blas_threads(threads);
}

SingleThreadedBlas::SingleThreadedBlas() : saved_(exchange_blas_threads(1)) {}
SingleThreadedBlas::~SingleThreadedBlas() { exchange_blas_threads(saved_); }

int cpu_threads() { return omp_get_max_threads(); }

}  // namespace meshtrain::ops::cpu
