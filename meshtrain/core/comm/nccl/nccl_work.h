// The Work of an op on a NCCL communicator: done when the event recorded after it on the comm
// stream has completed. wait() polls that event and the communicator's asynchronous error until
// the deadline, then orders the caller's stream (cudaStreamPerThread) after the op.
#pragma once

#include <memory>
#include <vector>

#include "meshtrain/core/comm/nccl/cuda_event.h"
#include "meshtrain/core/comm/nccl/nccl_context.h"
#include "meshtrain/core/comm/work.h"
#include "meshtrain/core/tensor.h"

namespace meshtrain::nccl {

class NcclWork : public Work {
 public:
  // buffers stay alive with the Work, as the op reads and writes them on the GPU.
  NcclWork(std::string description, std::chrono::milliseconds default_timeout,
           std::shared_ptr<NcclContext> context, CudaEvent done, std::vector<Tensor> buffers);

  // Dropped without a wait that returned (an error unwinding, a timeout), the op may still use its
  // buffers. Device buffers go back to the caching allocator, whose reuse is ordered on the
  // allocating thread's stream only, so the dropping thread (the issuing one, normally) makes its
  // stream wait for the op first (on the GPU). Pinned host buffers would go to any thread at once,
  // so unless the op is done they are kept for the rest of the process rather than handed out
  // under a live copy. Never throws.
  ~NcclWork() override;

  using Work::wait;
  void wait(std::chrono::milliseconds timeout) override;
  bool is_completed() override;

 private:
  std::shared_ptr<NcclContext> context_;
  CudaEvent done_;
  std::vector<Tensor> buffers_;
  bool stream_ordered_ = false;  // the caller's stream waits for done_
};

}  // namespace meshtrain::nccl
