#include "meshtrain/core/comm/nccl/cuda_event.h"

#include "meshtrain/core/comm/nccl/nccl_check.h"

namespace meshtrain::nccl {

CudaEvent::CudaEvent() {
  check_cuda(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming), "cudaEventCreate");
}

CudaEvent::~CudaEvent() {
  if (event_) cudaEventDestroy(event_);  // safe with work pending: freed once it completes
}

void CudaEvent::record(cudaStream_t stream) const {
  check_cuda(cudaEventRecord(event_, stream), "cudaEventRecord");
}

void CudaEvent::block(cudaStream_t stream) const {
  check_cuda(cudaStreamWaitEvent(stream, event_, 0), "cudaStreamWaitEvent");
}

}  // namespace meshtrain::nccl
