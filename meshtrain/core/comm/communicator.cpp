#include "meshtrain/core/comm/communicator.h"

#include <algorithm>
#include <tuple>

#include "meshtrain/core/error.h"
#include "meshtrain/core/trace/recorder.h"

namespace meshtrain {

namespace {
CommOp p2p_comm_op(const P2POp& op) {
  return op.kind == P2POp::send ? CommOp::send : CommOp::recv;
}

void check_same_dtype(const Tensor& a, const Tensor& b, std::string_view what) {
  MT_CHECK(a.dtype() == b.dtype(), what, ": in and out dtypes differ (", a.describe(), " vs ",
           b.describe(), ")");
}
}  // namespace

Communicator::Communicator(int rank, std::vector<int> world_ranks, std::string name,
                           CommOptions options)
    : rank_(rank), world_ranks_(std::move(world_ranks)), name_(std::move(name)), options_(options) {
  MT_CHECK(rank_ >= 0 && rank_ < size(), "rank ", rank_, " outside a group of ", size());
}

std::string Communicator::describe(CommOp op, size_t bytes) const {
  return detail::concat(comm_op_name(op), " of ", bytes, " bytes on group '", name_, "' (size ",
                        size(), ", ", backend_name(), ") at rank ", rank_, " (world rank ",
                        world_rank(), ")");
}

std::string Communicator::describe(const P2POp& op) const {
  const bool sends = op.kind == P2POp::send;
  return detail::concat(sends ? "send" : "recv", " of ", op.buffer.nbytes(), " bytes ",
                        sends ? "to" : "from", " rank ", op.peer, " on group '", name_, "' (size ",
                        size(), ", ", backend_name(), ") at rank ", rank_, " (world rank ",
                        world_rank(), ")");
}

void Communicator::require(CommOp op) const {
  if (!supports(op))
    throw NotSupported(detail::concat("the ", backend_name(), " backend does not support ",
                                      comm_op_name(op)));
}

void Communicator::check_peer(int peer, std::string_view what) const {
  MT_CHECK(peer >= 0 && peer < size() && peer != rank_, what, ": peer ", peer,
           " must be another rank of group '", name_, "' (size ", size(), ", this is rank ", rank_,
           ")");
}

Communicator::Issue Communicator::issue() const {
  // A group of one moves nothing: its ops complete at once and are not worth a span.
  trace::Recorder* recorder = size() > 1 ? trace::current() : nullptr;
  return Issue{recorder, recorder ? trace::now_ns() : 0};
}

WorkPtr Communicator::traced(const Issue& issue, std::string_view op, WorkPtr work) const {
  if (!issue.recorder || !work) return work;
  std::string name(op);
  if (const std::string* label = trace::CommLabel::current()) name += " " + *label;
  // The op keeps a shared recorder alive until it completes; one not owned by a shared_ptr must
  // outlive the ops issued while it is bound (a non-owning handle).
  std::shared_ptr<trace::Recorder> recorder = issue.recorder->weak_from_this().lock();
  if (!recorder)
    recorder = std::shared_ptr<trace::Recorder>(std::shared_ptr<void>(), issue.recorder);
  work->trace(std::move(recorder), name_, std::move(name), issue.ns);
  return work;
}

void Communicator::count(CommOp op, uint64_t sent, uint64_t received) {
  const size_t i = static_cast<size_t>(op);
  counters_.bytes_sent[i] += sent;
  counters_.bytes_received[i] += received;
  counters_.calls[i] += 1;
}

void Communicator::check_placement(const Tensor& out, const Tensor& in, std::string_view op,
                                   Crossing crossing) const {
  // "all_gather out": composed without a stream, as every collective checks its buffers.
  const auto name = [&](std::string_view which) {
    std::string text;
    text.reserve(op.size() + 1 + which.size());
    text.append(op).append(" ").append(which);
    return text;
  };
  const bool gpu_in = in.defined() && in.device().is_cuda();
  const bool gpu_out = out.defined() && out.device().is_cuda();
  if (crossing == Crossing::host_in && gpu_out && in.defined() && in.device().is_cpu()) {
    check_buffer(out, name("out"));  // the backend reads `in` from the host on its own stream
    check_host_crossing(in, name("in"));
    return;
  }
  if (crossing == Crossing::host_out && gpu_in && out.defined() && out.device().is_cpu()) {
    check_buffer(in, name("in"));  // the backend writes `out` to the host on its own stream
    check_host_crossing(out, name("out"));
    return;
  }
  check_buffer(out, name("out"));
  check_buffer(in, name("in"));
  const char* allowed = crossing == Crossing::host_in    ? " (or in on the host, out on a GPU)"
                        : crossing == Crossing::host_out ? " (or out on the host, in on a GPU)"
                                                         : "";
  MT_CHECK(in.device() == out.device(), op, ": in and out must be on one device", allowed,
           "; got in ", in.describe(), " and out ", out.describe());
}

WorkPtr Communicator::all_gather_into(const Tensor& out, const Tensor& in) {
  require(CommOp::all_gather);
  check_placement(out, in, "all_gather", Crossing::host_in);
  check_same_dtype(in, out, "all_gather");
  MT_CHECK(out.numel() == in.numel() * size(), "all_gather: out must hold world size (", size(),
           ") times in's ", in.numel(), " elements, got ", out.numel());
  const uint64_t moved = in.nbytes() * static_cast<uint64_t>(size() - 1);
  count(CommOp::all_gather, moved, moved);
  const Issue at = issue();
  return traced(at, "all_gather", do_all_gather(out, in));
}

WorkPtr Communicator::reduce_scatter_into(const Tensor& out, const Tensor& in, ReduceOp op) {
  require(CommOp::reduce_scatter);
  check_placement(out, in, "reduce_scatter", Crossing::host_out);
  check_same_dtype(in, out, "reduce_scatter");
  MT_CHECK(in.numel() == out.numel() * size(), "reduce_scatter: in must hold world size (",
           size(), ") times out's ", out.numel(), " elements, got ", in.numel());
  const uint64_t moved = out.nbytes() * static_cast<uint64_t>(size() - 1);
  count(CommOp::reduce_scatter, moved, moved);
  const Issue at = issue();
  return traced(at, "reduce_scatter", do_reduce_scatter(out, in, op));
}

WorkPtr Communicator::all_reduce(const Tensor& buffer, ReduceOp op) {
  require(CommOp::all_reduce);
  check_buffer(buffer, "all_reduce buffer");
  // 2(W-1)/W of the buffer each way; exact when W divides the buffer, as the ring does it.
  const uint64_t moved = 2 * buffer.nbytes() * static_cast<uint64_t>(size() - 1) / size();
  count(CommOp::all_reduce, moved, moved);
  const Issue at = issue();
  return traced(at, "all_reduce", do_all_reduce(buffer, op));
}

WorkPtr Communicator::broadcast(const Tensor& buffer, int root) {
  require(CommOp::broadcast);
  check_buffer(buffer, "broadcast buffer");
  MT_CHECK(root >= 0 && root < size(), "broadcast: root ", root, " outside group '", name_,
           "' of size ", size());
  const bool alone = size() == 1;
  count(CommOp::broadcast, rank_ == root && !alone ? buffer.nbytes() : 0,
        rank_ == root ? 0 : buffer.nbytes());
  const Issue at = issue();
  return traced(at, "broadcast", do_broadcast(buffer, root));
}

WorkPtr Communicator::send(const Tensor& buffer, int peer) {
  return batch_p2p({P2POp{P2POp::send, buffer, peer}}).front();
}

WorkPtr Communicator::recv(const Tensor& buffer, int peer) {
  return batch_p2p({P2POp{P2POp::recv, buffer, peer}}).front();
}

std::vector<WorkPtr> Communicator::batch_p2p(const std::vector<P2POp>& ops) {
  // Every op first, so that a bad one leaves nothing half issued (a peer would wait for the rest).
  for (size_t i = 0; i < ops.size(); ++i) {
    const P2POp& op = ops[i];
    const CommOp kind = p2p_comm_op(op);
    require(kind);
    // A lone send() or recv() reads as before; an op of a longer batch also says which it is.
    const std::string what =
        ops.size() == 1 ? std::string(comm_op_name(kind))
                        : detail::concat("batch_p2p op ", i, " (", comm_op_name(kind), ")");
    check_buffer(op.buffer, detail::concat(what, " buffer"));
    check_peer(op.peer, what);
  }
  if (ops.empty()) return {};
  for (const P2POp& op : ops) {
    const bool sends = op.kind == P2POp::send;
    count(p2p_comm_op(op), sends ? op.buffer.nbytes() : 0, sends ? 0 : op.buffer.nbytes());
  }
  const Issue at = issue();
  std::vector<WorkPtr> works = do_batch_p2p(ops);
  MT_ASSERT_EQ(works.size(), ops.size(), "the ", backend_name(),
               " backend's batch_p2p must return one Work per op");
  if (at.recorder)
    for (size_t i = 0; i < ops.size(); ++i)
      traced(at,
             detail::concat(ops[i].kind == P2POp::send ? "send to " : "recv from ", ops[i].peer),
             works[i]);
  return works;
}

WorkPtr Communicator::all_to_all(const Tensor& out, const Tensor& in) {
  require(CommOp::all_to_all);
  check_placement(out, in, "all_to_all", Crossing::none);
  check_same_dtype(in, out, "all_to_all");
  MT_CHECK(in.numel() == out.numel(), "all_to_all: in and out must hold as many elements, got ",
           in.numel(), " and ", out.numel());
  MT_CHECK(in.numel() % size() == 0, "all_to_all: elements must divide by the group size ",
           size(), ", got ", in.numel());
  const uint64_t moved = in.nbytes() / size() * static_cast<uint64_t>(size() - 1);
  count(CommOp::all_to_all, moved, moved);
  const Issue at = issue();
  return traced(at, "all_to_all", do_all_to_all(out, in));
}

WorkPtr Communicator::barrier() {
  require(CommOp::barrier);
  count(CommOp::barrier, 0, 0);
  const Issue at = issue();
  return traced(at, "barrier", do_barrier());
}

std::unique_ptr<Communicator> Communicator::split(int color, int key, std::string name) {
  MT_CHECK(color >= 0, "split: colors must be non-negative, got ", color);
  // Learn every rank's (color, key) with one all-gather on this communicator.
  const Device device = exchange_device();
  const Tensor mine = Tensor::from_vector(std::vector<int32_t>{color, key}, {2}).on(device);
  const Tensor all = Tensor::empty({2 * size()}, DType::i32, device);
  all_gather_into(all, mine)->wait();
  const Tensor host = all.on(Device::cpu());
  const int32_t* v = host.data<int32_t>();
  std::vector<std::tuple<int, int>> members;  // (key, rank)
  for (int r = 0; r < size(); ++r)
    if (v[2 * r] == color) members.emplace_back(v[2 * r + 1], r);
  std::sort(members.begin(), members.end());
  std::vector<int> ranks;
  for (const auto& [k, r] : members) ranks.push_back(r);
  return do_split(ranks, color, key, std::move(name));
}

std::unique_ptr<Communicator> Communicator::split_group(const std::vector<int>& group,
                                                        std::string name) {
  MT_CHECK(!group.empty(), "split_group: empty group");
  const auto self = std::find(group.begin(), group.end(), rank_);
  MT_CHECK(self != group.end(), "split_group: rank ", rank_, " is not in its own group");
  for (int r : group)
    MT_CHECK(r >= 0 && r < size(), "split_group: rank ", r, " outside group '", name_, "'");
  return make_group(group, std::move(name));
}

std::unique_ptr<Communicator> Communicator::make_group(const std::vector<int>& members,
                                                       std::string name) {
  // The smallest member names the group; a member's position in the list is its key.
  const int color = *std::min_element(members.begin(), members.end());
  const auto self = std::find(members.begin(), members.end(), rank_);
  auto sub = split(color, static_cast<int>(self - members.begin()), std::move(name));
  std::vector<int> expected;
  for (int r : members) expected.push_back(world_ranks_[r]);
  MT_CHECK(sub->world_ranks() == expected, "split_group: ranks disagree on the members of group '",
           sub->name(), "'; groups must partition '", name_, "'");
  return sub;
}

}  // namespace meshtrain
