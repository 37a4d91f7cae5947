#include "meshtrain/plan/shape_communicator.h"

#include <algorithm>
#include <numeric>

#include "meshtrain/core/comm/work.h"
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
    : ShapeCommunicator(rank, first_ranks(size), std::move(name)) {}

ShapeCommunicator::ShapeCommunicator(int rank, std::vector<int> world_ranks, std::string name)
    : Communicator(rank, std::move(world_ranks), std::move(name), CommOptions{}) {}

std::unique_ptr<Communicator> ShapeCommunicator::make_group(const std::vector<int>& members,
                                                            std::string name) {
  const auto self = std::find(members.begin(), members.end(), rank());
  std::vector<int> world;
  for (const int r : members) world.push_back(world_ranks()[r]);
  return std::unique_ptr<Communicator>(new ShapeCommunicator(
      static_cast<int>(self - members.begin()), std::move(world), std::move(name)));
}

bool ShapeCommunicator::supports(CommOp) const { return true; }

void ShapeCommunicator::refuse(std::string_view what) const {
  throw NotSupported(detail::concat(what, " on group '", name(),
                                    "': a shape-only group (the planner's) has sizes and ranks "
                                    "and takes shape-only tensors, but moves no data"));
}

WorkPtr ShapeCommunicator::done(std::string_view op) const {
  // Plain concatenation: a replay completes tens of thousands of these, and a string stream per
  // op was a tenth of the layout search's time.
  std::string description(op);
  description.append(" on shape-only group '").append(name()).append("'");
  return std::make_shared<CompletedWork>(std::move(description), options().timeout);
}

void ShapeCommunicator::check_buffer(const Tensor& buffer, std::string_view what) const {
  if (!buffer.defined() || !buffer.device().is_meta())
    refuse(detail::concat(what, " (", buffer.defined() ? buffer.describe() : "undefined", ")"));
}

WorkPtr ShapeCommunicator::do_all_gather(const Tensor&, const Tensor&) {
  return done("all_gather");
}
WorkPtr ShapeCommunicator::do_reduce_scatter(const Tensor&, const Tensor&, ReduceOp) {
  return done("reduce_scatter");
}
WorkPtr ShapeCommunicator::do_all_reduce(const Tensor&, ReduceOp) { return done("all_reduce"); }
WorkPtr ShapeCommunicator::do_broadcast(const Tensor&, int) { return done("broadcast"); }
std::vector<WorkPtr> ShapeCommunicator::do_batch_p2p(const std::vector<P2POp>& ops) {
  std::vector<WorkPtr> works;
  for (const P2POp& op : ops) works.push_back(done(op.kind == P2POp::send ? "send" : "recv"));
  return works;
}
WorkPtr ShapeCommunicator::do_all_to_all(const Tensor&, const Tensor&) {
  return done("all_to_all");
}
WorkPtr ShapeCommunicator::do_barrier() { return done("barrier"); }
std::unique_ptr<Communicator> ShapeCommunicator::do_split(const std::vector<int>&, int, int,
                                                          std::string) {
  refuse("split");
}

}  // namespace meshtrain
