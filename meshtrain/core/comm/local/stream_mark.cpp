#include "meshtrain/core/comm/local/stream_mark.h"

#include "meshtrain/core/error.h"
#include "meshtrain/config.h"

#if MESHTRAIN_HAS_CUDA
#include <cuda_runtime.h>
#endif

namespace meshtrain::local {

#if MESHTRAIN_HAS_CUDA
namespace {
void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    throw CommError(detail::concat("local backend: ", what, " failed: ", cudaGetErrorString(status)));
}
}  // namespace

std::shared_ptr<const StreamMark> StreamMark::record(Device device) {
  if (!device.is_cuda()) return nullptr;
  check(cudaSetDevice(device.index), "cudaSetDevice");
  std::shared_ptr<StreamMark> mark(new StreamMark);
  cudaEvent_t event = nullptr;
  check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate");
  mark->event_ = event;
  check(cudaEventRecord(event, cudaStreamPerThread), "cudaEventRecord");
  return mark;
}

StreamMark::~StreamMark() {
  // Safe with work still pending: CUDA releases the event once it completes.
  if (event_) cudaEventDestroy(static_cast<cudaEvent_t>(event_));
}

void StreamMark::order_stream_of(Device device) const {
  check(cudaSetDevice(device.index), "cudaSetDevice");
  check(cudaStreamWaitEvent(cudaStreamPerThread, static_cast<cudaEvent_t>(event_), 0),
        "cudaStreamWaitEvent");
}
#else
std::shared_ptr<const StreamMark> StreamMark::record(Device device) {
  if (!device.is_cuda()) return nullptr;
  throw NotSupported("the local backend got a CUDA buffer, but this build has no CUDA");
}
StreamMark::~StreamMark() = default;
void StreamMark::order_stream_of(Device) const {}
#endif

void order_after(const std::shared_ptr<const StreamMark>& mark, Device device) {
  if (mark) mark->order_stream_of(device);
}

}  // namespace meshtrain::local
