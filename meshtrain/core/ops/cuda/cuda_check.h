// Error checks and per-thread state shared by the CUDA kernels (private to meshtrain/core/ops/cuda).
// Every kernel and cuBLAS call goes to cudaStreamPerThread, the calling thread's stream.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "meshtrain/core/tensor.h"

namespace meshtrain::ops::cuda {

// Throws meshtrain::Error naming the failed call, its place and the library's message.
[[noreturn]] void throw_cuda_error(const char* call, const char* file, int line,
                                   const char* message);

// This thread's cuBLAS handle for the current device, bound to cudaStreamPerThread.
cublasHandle_t cublas_handle();

// Makes the tensor's device current so that launches and cuBLAS calls land on it.
void use_device(const Tensor& t);

inline cudaStream_t stream() { return cudaStreamPerThread; }

}  // namespace meshtrain::ops::cuda

#define MT_CUDA_CHECK(call)                                                     \
  do {                                                                          \
    const cudaError_t mt_status_ = (call);                                      \
    if (mt_status_ != cudaSuccess)                                              \
      ::meshtrain::ops::cuda::throw_cuda_error(#call, __FILE__, __LINE__,       \
                                               cudaGetErrorString(mt_status_)); \
  } while (0)

#define MT_CUBLAS_CHECK(call)                                                      \
  do {                                                                             \
    const cublasStatus_t mt_status_ = (call);                                      \
    if (mt_status_ != CUBLAS_STATUS_SUCCESS)                                       \
      ::meshtrain::ops::cuda::throw_cuda_error(#call, __FILE__, __LINE__,          \
                                               cublasGetStatusString(mt_status_)); \
  } while (0)

// After a kernel launch: reports a bad launch configuration (not errors raised while it runs).
#define MT_CUDA_CHECK_LAUNCH(kernel_name) \
  ::meshtrain::ops::cuda::check_launch_status(kernel_name, __FILE__, __LINE__)

namespace meshtrain::ops::cuda {
inline void check_launch_status(const char* kernel_name, const char* file, int line) {
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) throw_cuda_error(kernel_name, file, line, cudaGetErrorString(status));
}
}  // namespace meshtrain::ops::cuda
