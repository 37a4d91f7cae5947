// ShapeCommunicator: a group that knows only its members (their world ranks) and this rank's place
// among them, for the planner's code that runs one rank's part of a layout alone, without a
// backend and without the other ranks: a module's parallelize asks it how many ranks share a
// dimension and which slice is this rank's; a DeviceMesh built over a shape-only world gets
// shape-only groups for its axes (split_group needs no exchange: this rank's group is all it must
// know); and strategies and layers computing over shape-only tensors (Device::meta) issue their
// collectives through them. Such a collective is checked (shapes, dtypes) and counted as on any
// group and completes at once: a shape-only buffer holds nothing to move, and a barrier alone
// waits for nobody. A buffer with storage and split() by colors (which exchanges them) throw
// NotSupported: no data moves.
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
  bool supports(CommOp op) const override;  // every op

 protected:
  // This rank's group, with the world ranks of its members; no other rank takes part.
  std::unique_ptr<Communicator> make_group(const std::vector<int>& members,
                                           std::string name) override;
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
  ShapeCommunicator(int rank, std::vector<int> world_ranks, std::string name);
  [[noreturn]] void refuse(std::string_view what) const;
  WorkPtr done(std::string_view op) const;
};

}  // namespace meshtrain
