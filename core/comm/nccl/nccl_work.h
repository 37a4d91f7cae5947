// The Work of an op on a NCCL communicator: done when the event recorded after it on the comm
// stream has completed. wait() polls that event and the communicator's asynchronous error until
// the deadline, then orders the caller's stream (cudaStreamPerThread) after the op.
#pragma once

#include <memory>
#include <vector>

#include "core/comm/nccl/cuda_event.h"
#include "core/comm/nccl/nccl_context.h"
#include "core/comm/work.h"
#include "core/tensor.h"

namespace meshtrain::nccl {

class NcclWork : public Work {
 public:
  // buffers stay alive with the Work, as the op reads and writes them on the GPU.
  NcclWork(std::string description, std::chrono::milliseconds default_timeout,
           std::shared_ptr<NcclContext> context, CudaEvent done, std::vector<Tensor> buffers);

  using Work::wait;
  void wait(std::chrono::milliseconds timeout) override;
  bool is_completed() override;

 private:
  std::shared_ptr<NcclContext> context_;
  CudaEvent done_;
  std::vector<Tensor> buffers_;
};

}  // namespace meshtrain::nccl
