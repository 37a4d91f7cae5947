// The nccl backend's Communicator: every op runs on the communicator's own CUDA stream, after
// the work already queued on the caller's stream (cudaStreamPerThread), and returns an NcclWork.
// Buffers must live on this communicator's GPU. An op returns once NCCL has enqueued it; the first
// send/recv between two ranks may wait there (up to the timeout) for the peer to post its side,
// so order point-to-point pairs so that they cannot wait in a cycle, or use all_to_all.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/comm/communicator.h"
#include "core/comm/nccl/nccl_context.h"

namespace meshtrain::nccl {

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(std::shared_ptr<NcclContext> context, int rank, std::vector<int> world_ranks,
                   std::string name, CommOptions options);

  std::string_view backend_name() const override { return "nccl"; }
  bool supports(CommOp) const override { return true; }
  Device exchange_device() const override { return Device::cuda(context_->device()); }

 protected:
  void check_buffer(const Tensor& buffer, std::string_view what) const override;

  WorkPtr do_all_gather(const Tensor& out, const Tensor& in) override;
  WorkPtr do_reduce_scatter(const Tensor& out, const Tensor& in, ReduceOp op) override;
  WorkPtr do_all_reduce(const Tensor& buffer, ReduceOp op) override;
  WorkPtr do_broadcast(const Tensor& buffer, int root) override;
  WorkPtr do_send(const Tensor& buffer, int peer) override;
  WorkPtr do_recv(const Tensor& buffer, int peer) override;
  WorkPtr do_all_to_all(const Tensor& out, const Tensor& in) override;
  WorkPtr do_barrier() override;
  std::unique_ptr<Communicator> do_split(const std::vector<int>& members, int color, int key,
                                         std::string name) override;

 private:
  // Orders the comm stream after the caller's stream, issues call(comm, stream) (one NCCL call
  // or group), waits until NCCL has enqueued it and records its completion.
  template <typename Call>
  WorkPtr launch(CommOp op, size_t bytes, std::vector<Tensor> buffers, Call&& call);

  std::shared_ptr<NcclContext> context_;
};

}  // namespace meshtrain::nccl
