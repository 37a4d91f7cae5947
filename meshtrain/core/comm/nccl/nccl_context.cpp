#include "meshtrain/core/comm/nccl/nccl_context.h"

#include "meshtrain/core/comm/nccl/nccl_check.h"
#include "meshtrain/core/error.h"

namespace meshtrain::nccl {

namespace {
std::chrono::steady_clock::time_point deadline_after(std::chrono::milliseconds timeout) {
  return std::chrono::steady_clock::now() + timeout;
}
}  // namespace

NcclContext::NcclContext(ncclComm_t comm, int device, std::chrono::milliseconds teardown_timeout)
    : comm_(comm), device_(device), teardown_timeout_(teardown_timeout) {
  try {
    activate();
    // Non-blocking: the comm stream must not serialise with the legacy default stream.
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    check_cuda(cudaMalloc(&barrier_buffer_, sizeof(int32_t)), "cudaMalloc of the barrier buffer");
    check_cuda(cudaMemset(barrier_buffer_, 0, sizeof(int32_t)), "cudaMemset");
  } catch (...) {
    ncclCommAbort(comm_);
    if (stream_) cudaStreamDestroy(stream_);
    cudaFree(barrier_buffer_);
    throw;
  }
}

NcclContext::~NcclContext() {
  cudaSetDevice(device_);
  if (!aborted_ && !shut_down_cleanly()) abort();
  cudaStreamDestroy(stream_);
  cudaFree(barrier_buffer_);
}

bool NcclContext::shut_down_cleanly() {
  const auto deadline = deadline_after(teardown_timeout_);
  std::string error;
  // Our own ops first, watching for peers that failed meanwhile.
  const Progress drained = poll_until(deadline, [&] {
    const cudaError_t status = cudaStreamQuery(stream_);
    if (status == cudaSuccess) return Progress::done;
    if (status != cudaErrorNotReady) return Progress::failed;
    return poll_state(&error) == Progress::failed ? Progress::failed : Progress::pending;
  });
  if (drained != Progress::done) return false;
  // Finalize waits for every rank to quiesce; destroy then frees local resources without blocking.
  const ncclResult_t finalize = ncclCommFinalize(comm_);
  if (finalize != ncclSuccess && finalize != ncclInProgress) return false;
  if (poll_until(deadline, [&] { return poll_state(&error); }) != Progress::done) return false;
  return ncclCommDestroy(comm_) == ncclSuccess;
}

void NcclContext::activate() const { check_cuda(cudaSetDevice(device_), "cudaSetDevice"); }

Progress NcclContext::poll_state(std::string* error) const {
  ncclResult_t state = ncclSuccess;
  const ncclResult_t queried = ncclCommGetAsyncError(comm_, &state);
  if (queried != ncclSuccess) state = queried;
  if (state == ncclSuccess) return Progress::done;
  if (state == ncclInProgress) return Progress::pending;
  *error = error_text(state);
  return Progress::failed;
}

void NcclContext::wait_ready(const std::string& what, std::chrono::milliseconds timeout) {
  std::string error;
  const Progress progress = poll_until(deadline_after(timeout), [&] { return poll_state(&error); });
  if (progress != Progress::done) fail(what, progress, error, timeout);
}

void NcclContext::fail(const std::string& what, Progress progress, const std::string& error,
                       std::chrono::milliseconds timeout) {
  abort();
  if (progress == Progress::pending)
    throw Timeout(detail::concat("timed out after ", timeout.count(), " ms: ", what,
                                 "; the NCCL communicator was aborted"));
  throw CommError(detail::concat(what, " failed: ", error, "; the NCCL communicator was aborted"));
}

void NcclContext::require_usable(const std::string& what) const {
  if (aborted_)
    throw CommError(detail::concat(what, ": the NCCL communicator was aborted after an earlier ",
                                   "error or timeout"));
}

void NcclContext::abort() {
  if (aborted_) return;
  aborted_ = true;
  ncclCommAbort(comm_);
}

}  // namespace meshtrain::nccl
