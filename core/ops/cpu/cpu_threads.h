// How many threads the CPU kernels of the calling thread use. Local-backend ranks are threads of one
// process, so the setting is per calling thread: it is OpenMP's nthreads ICV (omp_set_num_threads),
// which the kernels' parallel regions and oneDNN (libgomp) read. OpenBLAS has only a process-wide
// count, which set_cpu_threads sets too (see cpu_threads.cpp).
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
