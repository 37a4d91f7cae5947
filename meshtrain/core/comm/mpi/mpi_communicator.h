// MpiCommunicator: a Communicator over one MPI communicator, for host tensors. Every op is a
// nonblocking MPI collective (or Isend/Irecv) run by the group's progress thread. bf16 reductions
// are staged through f32 buffers and rounded once; avg is a sum divided by the group size.
// A receive checks the size of what arrived (a longer message fails as truncated, a shorter one
// names both sizes); MPI does not tell the dtypes apart, and the sender learns of neither.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <mpi.h>

#include "meshtrain/core/comm/communicator.h"
#include "meshtrain/core/comm/mpi/mpi_progress.h"
#include "meshtrain/core/comm/mpi/mpi_runtime.h"

namespace meshtrain {

class MpiCommunicator final : public Communicator {
 public:
  // Takes ownership of comm (which must have MPI_ERRORS_RETURN set).
  MpiCommunicator(std::shared_ptr<MpiRuntime> runtime, MPI_Comm comm, std::vector<int> world_ranks,
                  std::string name, CommOptions options);
  ~MpiCommunicator() override;

  std::string_view backend_name() const override { return "mpi"; }
  bool supports(CommOp) const override { return true; }

 protected:
  void check_buffer(const Tensor& buffer, std::string_view what) const override;

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
  WorkPtr submit(CommOp op, size_t bytes, std::function<MPI_Request()> start,
                 std::function<void(const MPI_Status&)> finish = {});
  // The MPI op of one point-to-point transfer, not yet queued.
  MpiOp p2p_op(const P2POp& op) const;

  std::shared_ptr<MpiRuntime> runtime_;  // keeps MPI initialised while this group lives
  MPI_Comm comm_;
  MpiProgress progress_;
};

}  // namespace meshtrain
