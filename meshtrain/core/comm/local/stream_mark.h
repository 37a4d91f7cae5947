// A point in a rank's CUDA stream. The local backend moves a rank's device buffers on other
// threads (progress threads, whose streams are their own), so each copy first waits for the mark
// its owner recorded when it issued the op: then it reads what the owner's queued kernels wrote,
// and overwrites nothing they still use. Host buffers need no mark.
#pragma once

#include <memory>

#include "meshtrain/core/device.h"

namespace meshtrain::local {

class StreamMark {
 public:
  // Recorded on the calling thread's stream for a CUDA device; null for the host.
  static std::shared_ptr<const StreamMark> record(Device device);
  ~StreamMark();
  StreamMark(const StreamMark&) = delete;
  StreamMark& operator=(const StreamMark&) = delete;

  // Makes the calling thread's stream on `device` wait for the mark, on the GPU (the host does
  // not block).
  void order_stream_of(Device device) const;

 private:
  StreamMark() = default;
  void* event_ = nullptr;  // cudaEvent_t
};

// Makes the calling thread's stream wait for a mark; does nothing for a null one (host buffers).
void order_after(const std::shared_ptr<const StreamMark>& mark, Device device);

}  // namespace meshtrain::local
