// The nccl backend's Communicator: every op runs on the communicator's own CUDA stream, after
// the work already queued on the caller's stream (cudaStreamPerThread), and returns an NcclWork.
// Buffers must live on this communicator's GPU, but for offload's pinned host buffers (an
// all-gather's in, a reduce-scatter's out), which cross through device memory by copies on the
// comm stream.
// An op returns once NCCL has enqueued it.
// Point-to-point: the ops of one batch_p2p() form one NCCL group (ncclGroupStart/End), which NCCL
// runs as a whole, so sends and receives of a batch cannot wait for each other; separate send()
// and recv() calls run one after the other on the stream, so a receive issued before a send
// between neighbours deadlocks unless both are in one batch. Zero-byte transfers are skipped
// (every rank knows the sizes), and NCCL cannot detect a size mismatch between the two sides.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "meshtrain/core/comm/communicator.h"
#include "meshtrain/core/comm/nccl/nccl_context.h"

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
  // Pinned memory only: from pageable memory cudaMemcpyAsync would block this thread until the
  // stream got there, outside every timeout.
  void check_host_crossing(const Tensor& host, std::string_view what) const override;

  WorkPtr do_all_gather(const Tensor& out, const Tensor& in) override;
  WorkPtr do_reduce_scatter(const Tensor& out, const Tensor& in, ReduceOp op) override;
  WorkPtr do_all_reduce(const Tensor& buffer, ReduceOp op) override;
  WorkPtr do_broadcast(const Tensor& buffer, int root) override;
  std::vector<WorkPtr> do_batch_p2p(const std::vector<P2POp>& ops) override;
  WorkPtr do_all_to_all(const Tensor& out, const Tensor& in) override;
  WorkPtr do_barrier() override;
  std::unique_ptr<Communicator> do_split(const std::vector<int>& members, int color, int key,
                                         std::string name) override;

 private:
  // Orders the comm stream after the caller's stream, issues call(comm, stream) (one NCCL call
  // or group) and waits until NCCL has enqueued it; `what` names it in errors. A failure aborts
  // the communicator: this rank's ops would no longer match its peers'.
  template <typename Call>
  void enqueue(const std::string& what, Call&& call);
  // enqueue(), then `after_op` (more work on the comm stream behind the op, when given), then a
  // Work done when all of it is (complete at once when the op moves no bytes).
  template <typename Call>
  WorkPtr launch(CommOp op, size_t bytes, std::vector<Tensor> buffers, Call&& call,
                 const std::function<void(cudaStream_t)>& after_op = nullptr);
  // A Work done when what the stream holds so far is.
  WorkPtr work_after_enqueued(std::string what, std::vector<Tensor> buffers);

  std::shared_ptr<NcclContext> context_;
};

}  // namespace meshtrain::nccl
