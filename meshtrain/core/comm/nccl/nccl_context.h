// One NCCL communicator (in non-blocking mode) with its GPU, its dedicated stream and a one-element
// buffer for barriers. The Communicator and its in-flight Works share it, so a Work that outlives
// its Communicator stays valid. Used from the thread that issues the ops, like the Communicator.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "meshtrain/core/comm/nccl/poll.h"

namespace meshtrain::nccl {

class NcclContext {
 public:
  // Takes ownership of comm, which may still be initialising; aborts it if setup here fails.
  // teardown_timeout bounds the wait for outstanding work at destruction.
  NcclContext(ncclComm_t comm, int device, std::chrono::milliseconds teardown_timeout);
  // Drains and destroys the communicator, or aborts it if it failed or does not drain in time.
  ~NcclContext();
  NcclContext(const NcclContext&) = delete;
  NcclContext& operator=(const NcclContext&) = delete;

  ncclComm_t comm() const { return comm_; }
  cudaStream_t stream() const { return stream_; }
  int device() const { return device_; }
  int32_t* barrier_buffer() const { return barrier_buffer_; }
  // Makes this communicator's GPU current on the calling thread.
  void activate() const;

  // A non-blocking communicator may still be initialising or enqueuing an op in the background:
  // polls until it is ready. On an error or past the timeout it aborts and throws (see fail()).
  void wait_ready(const std::string& what, std::chrono::milliseconds timeout);
  // The asynchronous state: done when idle, pending while NCCL is busy, failed on an error
  // (whose text goes to *error).
  Progress poll_state(std::string* error) const;
  // Aborts the communicator and throws Timeout (progress pending) or CommError (failed).
  [[noreturn]] void fail(const std::string& what, Progress progress, const std::string& error,
                         std::chrono::milliseconds timeout);
  // Throws CommError naming what once the communicator has been aborted.
  void require_usable(const std::string& what) const;
  void abort();

 private:
  bool shut_down_cleanly();

  ncclComm_t comm_;
  int device_;
  std::chrono::milliseconds teardown_timeout_;
  cudaStream_t stream_ = nullptr;
  int32_t* barrier_buffer_ = nullptr;
  bool aborted_ = false;
};

}  // namespace meshtrain::nccl
