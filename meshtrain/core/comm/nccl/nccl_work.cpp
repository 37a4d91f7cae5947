#include "meshtrain/core/comm/nccl/nccl_work.h"

#include <mutex>
#include <vector>

#include "meshtrain/core/comm/nccl/nccl_check.h"

namespace meshtrain::nccl {

NcclWork::NcclWork(std::string description, std::chrono::milliseconds default_timeout,
                   std::shared_ptr<NcclContext> context, CudaEvent done,
                   std::vector<Tensor> buffers)
    : Work(std::move(description), default_timeout),
      context_(std::move(context)),
      done_(std::move(done)),
      buffers_(std::move(buffers)) {}

namespace {
void keep_for_the_process(Tensor buffer) {
  static std::mutex mutex;
  static auto* kept = new std::vector<Tensor>;  // never destroyed, on purpose
  const std::lock_guard lock(mutex);
  kept->push_back(std::move(buffer));
}
}  // namespace

NcclWork::~NcclWork() {
  if (stream_ordered_) return;
  if (cudaStreamWaitEvent(cudaStreamPerThread, done_.get(), 0) != cudaSuccess ||
      cudaEventQuery(done_.get()) != cudaSuccess) {
    cudaGetLastError();  // cleared: no later launch check reports it as its own
    for (Tensor& buffer : buffers_)
      if (buffer.device().is_cpu()) keep_for_the_process(std::move(buffer));
  }
}

void NcclWork::wait(std::chrono::milliseconds timeout) {
  context_->require_usable(description());
  context_->activate();
  std::string error;
  const auto blocked_from = std::chrono::steady_clock::now();
  const Progress progress = poll_until(blocked_from + timeout, [&] {
    const cudaError_t status = cudaEventQuery(done_.get());
    if (status == cudaSuccess) return Progress::done;
    if (status != cudaErrorNotReady) {
      error = cudaGetErrorString(status);
      return Progress::failed;
    }
    // A peer's failure shows here long before the op would complete (if ever).
    return context_->poll_state(&error) == Progress::failed ? Progress::failed : Progress::pending;
  });
  add_wait_seconds(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - blocked_from).count());
  if (progress != Progress::done) context_->fail(description(), progress, error, timeout);
  done_.block(cudaStreamPerThread);
  stream_ordered_ = true;
}

bool NcclWork::is_completed() { return cudaEventQuery(done_.get()) == cudaSuccess; }

}  // namespace meshtrain::nccl
