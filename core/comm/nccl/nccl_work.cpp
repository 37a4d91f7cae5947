#include "core/comm/nccl/nccl_work.h"

#include "core/comm/nccl/nccl_check.h"

namespace meshtrain::nccl {

NcclWork::NcclWork(std::string description, std::chrono::milliseconds default_timeout,
                   std::shared_ptr<NcclContext> context, CudaEvent done,
                   std::vector<Tensor> buffers)
    : Work(std::move(description), default_timeout),
      context_(std::move(context)),
      done_(std::move(done)),
      buffers_(std::move(buffers)) {}

void NcclWork::wait(std::chrono::milliseconds timeout) {
  context_->require_usable(description());
  context_->activate();
  std::string error;
  const Progress progress = poll_until(std::chrono::steady_clock::now() + timeout, [&] {
    const cudaError_t status = cudaEventQuery(done_.get());
    if (status == cudaSuccess) return Progress::done;
    if (status != cudaErrorNotReady) {
      error = cudaGetErrorString(status);
      return Progress::failed;
    }
    // A peer's failure shows here long before the op would complete (if ever).
    return context_->poll_state(&error) == Progress::failed ? Progress::failed : Progress::pending;
  });
  if (progress != Progress::done) context_->fail(description(), progress, error, timeout);
  done_.block(cudaStreamPerThread);
}

bool NcclWork::is_completed() { return cudaEventQuery(done_.get()) == cudaSuccess; }

}  // namespace meshtrain::nccl
