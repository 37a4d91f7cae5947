// How many threads the CPU kernels of the calling thread use. Local-backend ranks are threads of
// one process, so the setting is per calling thread: it is OpenMP's nthreads ICV
// (omp_set_num_threads), which the kernels (run_on_threads below) and oneDNN (libgomp) read.
// OpenBLAS has only a process-wide count, which set_cpu_threads sets too (see cpu_threads.cpp).
#pragma once

namespace meshtrain::ops::cpu {

// Threads for the calling thread's CPU kernels (>= 1), and for OpenBLAS process-wide. Ranks
// sharing a process each run with one thread so that they do not oversubscribe the cores.
void set_cpu_threads(int threads);

// The calling thread's setting: the last set_cpu_threads on this thread, else OpenMP's default
// (OMP_NUM_THREADS or the number of cores).
int cpu_threads();

// While alive, OpenBLAS runs single-threaded (process-wide), then gets its count back. For GEMMs
// called from inside a kernel's own parallel region: the pthread build of OpenBLAS does not notice
// that it is called from an OpenMP thread (only its OpenMP build checks omp_in_parallel), so each
// caller would hand its GEMM to OpenBLAS's thread pool as well and the threads would contend.
// Runs job(context, i) for i in [0, n) on n threads: i = 0 on the calling thread, the others on
// worker threads that the calling thread owns (started on first use, kept for its lifetime).
// Returns when all are done. A job must not throw. Called from inside a job, it runs all n parts
// on that thread, one after another. The kernels reach it through parallel_for (parallel.h).
//
// Why not OpenMP's own pool: libgomp's idle workers spin for milliseconds (GOMP_SPINCOUNT, only
// settable from the environment before the program starts), and on a machine whose cores the
// kernels share with OpenBLAS's threads that spinning took the core from the next GEMM: a 2-thread
// training step ran 1.37 s with OpenMP's pool against 0.91 s with OMP_WAIT_POLICY=passive. These
// workers spin for some microseconds, then sleep.
void run_on_threads(int n, void (*job)(void* context, int index), void* context);

class SingleThreadedBlas {
 public:
  SingleThreadedBlas();
  ~SingleThreadedBlas();
  SingleThreadedBlas(const SingleThreadedBlas&) = delete;
  SingleThreadedBlas& operator=(const SingleThreadedBlas&) = delete;

 private:
  int saved_;
};

}  // namespace meshtrain::ops::cpu
