#include "meshtrain/plan/shape_communicator.h"

#include <numeric>

#include "meshtrain/core/error.h"

namespace meshtrain {

namespace {
std::vector<int> first_ranks(int size) {
  MT_CHECK(size >= 1, "a shape-only group needs at least one member, got ", size);
  std::vector<int> ranks(static_cast<size_t>(size));
  std::iota(ranks.begin(), ranks.end(), 0);
  return ranks;
}
}  // namespace

ShapeCommunicator::ShapeCommunicator(int size, int rank, std::string name)
    : Communicator(rank, first_ranks(size), std::move(name), CommOptions{}) {}

void ShapeCommunicator::refuse(std::string_view what) const {
  throw NotSupported(detail::concat(what, " on group '", name(),
                                    "': a shape-only group (the "
                                    "planner's) has sizes and ranks but moves no data"));
}

void ShapeCommunicator::check_buffer(const Tensor&, std::string_view what) const { refuse(what); }
WorkPtr ShapeCommunicator::do_all_gather(const Tensor&, const Tensor&) { refuse("all_gather"); }
WorkPtr ShapeCommunicator::do_reduce_scatter(const Tensor&, const Tensor&, ReduceOp) {
  refuse("reduce_scatter");
}
WorkPtr ShapeCommunicator::do_all_reduce(const Tensor&, ReduceOp) { refuse("all_reduce"); }
WorkPtr ShapeCommunicator::do_broadcast(const Tensor&, int) { refuse("broadcast"); }
std::vector<WorkPtr> ShapeCommunicator::do_batch_p2p(const std::vector<P2POp>&) {
  refuse("send/recv");
}
WorkPtr ShapeCommunicator::do_all_to_all(const Tensor&, const Tensor&) { refuse("all_to_all"); }
WorkPtr ShapeCommunicator::do_barrier() { refuse("barrier"); }
std::unique_ptr<Communicator> ShapeCommunicator::do_split(const std::vector<int>&, int, int,
                                                          std::string) {
  refuse("split");
}

}  // namespace meshtrain
