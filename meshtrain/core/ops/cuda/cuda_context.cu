// Error reporting and the per-thread cuBLAS handles behind cuda_check.h.
#include <vector>

#include "meshtrain/core/error.h"
#include "meshtrain/core/ops/cuda/cuda_check.h"

namespace meshtrain::ops::cuda {

void throw_cuda_error(const char* call, const char* file, int line, const char* message) {
  throw Error(detail::concat(call, " failed at ", file, ":", line, ": ", message));
}

namespace {
// One handle per device this thread has used; cuBLAS handles are not meant to be shared between
// threads that run concurrently, and each is bound to its device at creation.
struct ThreadCublasHandles {
  std::vector<cublasHandle_t> by_device;
  ~ThreadCublasHandles() {
    for (cublasHandle_t handle : by_device)
      if (handle) cublasDestroy(handle);  // at thread exit: nothing to report to
  }
};
}  // namespace

cublasHandle_t cublas_handle() {
  thread_local ThreadCublasHandles handles;
  int device = 0;
  MT_CUDA_CHECK(cudaGetDevice(&device));
  if (static_cast<size_t>(device) >= handles.by_device.size())
    handles.by_device.resize(static_cast<size_t>(device) + 1, nullptr);
  cublasHandle_t& handle = handles.by_device[static_cast<size_t>(device)];
  if (!handle) {
    cublasHandle_t created = nullptr;
    MT_CUBLAS_CHECK(cublasCreate(&created));
    const cublasStatus_t bound = cublasSetStream(created, cudaStreamPerThread);
    if (bound != CUBLAS_STATUS_SUCCESS) cublasDestroy(created);
    MT_CUBLAS_CHECK(bound);
    handle = created;
  }
  return handle;
}

void use_device(const Tensor& t) {
  MT_ASSERT(t.device().is_cuda(), "CUDA kernel called with ", t.describe());
  MT_CUDA_CHECK(cudaSetDevice(t.device().index));
}

}  // namespace meshtrain::ops::cuda
