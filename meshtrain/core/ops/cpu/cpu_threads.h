// How many threads the CPU kernels of the calling thread use, and the worker threads that run their
// parallel parts. Local-backend ranks are threads of one process, so the count is per calling
// thread. Every parallel part runs on these workers, GEMMs included: OpenBLAS and oneDNN run
// single-threaded on whichever thread calls them, and the GEMM helpers split the output across the
// workers (blas.h). The libraries' own pools would spin for milliseconds after each call
// (OpenBLAS's THREAD_TIMEOUT, libgomp's GOMP_SPINCOUNT, both settable only from the environment
// before the program starts) on the cores the next kernel needs: a 2-thread f32 training step took
// 0.91 s on OpenBLAS's threads against 0.71 s with them told not to spin.
#pragma once

#include <chrono>

namespace meshtrain::ops::cpu {

// The most threads one caller's kernels may use: far past any machine's cores per rank, and the
// width of a part index in the team's claim word.
constexpr int kMaxCpuThreads = 4096;

// Threads for the calling thread's CPU kernels (1 to kMaxCpuThreads).
void set_cpu_threads(int threads);

// The calling thread's setting: the last set_cpu_threads on this thread, else available_cpus().
int cpu_threads();

// The CPUs this process may run on (its affinity mask: taskset and cgroup cpusets count).
int available_cpus();

// How long the calling thread's run_on_threads waits for a part still running on a worker, in
// time this process was awake (meshtrain/core/awake_wait.h), before it fails with Timeout: a part that runs
// that long is stuck, and a stuck team must end the run, not hang it. The trainer sets --timeout.
constexpr std::chrono::milliseconds kDefaultPartTimeout{std::chrono::seconds(120)};
void set_cpu_part_timeout(std::chrono::milliseconds timeout);

// Runs job(context, i) for each i in [0, n) exactly once, on the calling thread and n - 1 worker
// threads that the calling thread owns (started on first use, kept for its lifetime; they spin for
// some microseconds, then sleep). Each thread claims the next part until none is left, so which
// thread runs which part varies from call to call. Returns when all are done. A part that throws
// does not stop the others (they share the caller's stack frame); the first exception is rethrown
// here once all are done. Called from inside a job (or with n <= 1), it runs the parts on the
// calling thread, one after another, and an exception leaves at once. The kernels reach it
// through parallel_for (parallel.h).
void run_on_threads(int n, void (*job)(void* context, int index), void* context);

}  // namespace meshtrain::ops::cpu
