// An owned CUDA event without timing, the cheap kind used to order streams.
#pragma once

#include <cuda_runtime.h>

namespace meshtrain::nccl {

class CudaEvent {
 public:
  CudaEvent();  // on the current device
  ~CudaEvent();
  CudaEvent(CudaEvent&& other) noexcept : event_(other.event_) { other.event_ = nullptr; }
  CudaEvent& operator=(CudaEvent&&) = delete;
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  cudaEvent_t get() const { return event_; }
  void record(cudaStream_t stream) const;
  // Makes stream wait (on the GPU) for the work this event was recorded after.
  void block(cudaStream_t stream) const;

 private:
  cudaEvent_t event_ = nullptr;
};

}  // namespace meshtrain::nccl
