// ShapeCommunicator: a group that knows only its size and this rank's place in it, for code that
// asks a communicator how many ranks share a dimension and which slice is this rank's (a module's
// parallelize under tensor parallelism) while the planner builds a rank's model without any
// backend. Every collective throws NotSupported: nothing may move through it.
#pragma once

#include <memory>
#include <string>

#include "meshtrain/core/comm/communicator.h"

namespace meshtrain {

class ShapeCommunicator : public Communicator {
 public:
  // `size` members, this one at `rank`; world ranks 0..size-1.
  ShapeCommunicator(int size, int rank, std::string name);

  std::string_view backend_name() const override { return "shape-only"; }
  bool supports(CommOp /*op*/) const override { return false; }

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
  [[noreturn]] void refuse(std::string_view what) const;
};

}  // namespace meshtrain
