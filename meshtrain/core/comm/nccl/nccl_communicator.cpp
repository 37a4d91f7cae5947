#include "meshtrain/core/comm/nccl/nccl_communicator.h"

#include <algorithm>

#include "meshtrain/core/comm/nccl/cuda_event.h"
#include "meshtrain/core/comm/nccl/nccl_check.h"
#include "meshtrain/core/comm/nccl/nccl_work.h"
#include "meshtrain/core/error.h"

namespace meshtrain::nccl {

NcclCommunicator::NcclCommunicator(std::shared_ptr<NcclContext> context, int rank,
                                   std::vector<int> world_ranks, std::string name,
                                   CommOptions options)
    : Communicator(rank, std::move(world_ranks), std::move(name), options),
      context_(std::move(context)) {}

void NcclCommunicator::check_buffer(const Tensor& buffer, std::string_view what) const {
  MT_CHECK(buffer.defined() && buffer.device() == Device::cuda(context_->device()), what,
           ": the nccl backend of group '", name(), "' needs a tensor on cuda:", context_->device(),
           ", got ", buffer.defined() ? buffer.describe() : "an undefined tensor");
}

void NcclCommunicator::check_host_crossing(const Tensor& host, std::string_view what) const {
  MT_CHECK(host.pinned(), what, ": the nccl backend of group '", name(),
           "' copies host buffers on its stream from pinned memory only (Tensor::empty_pinned), "
           "got ",
           host.describe());
}

template <typename Call>
void NcclCommunicator::enqueue(const std::string& what, Call&& call) {
  context_->require_usable(what);
  context_->activate();
  const CudaEvent inputs_ready;
  inputs_ready.record(cudaStreamPerThread);
  inputs_ready.block(context_->stream());
  try {
    check_nccl(call(context_->comm(), context_->stream()), what);
  } catch (...) {
    context_->abort();
    throw;
  }
  context_->wait_ready(what, options().timeout);
}

WorkPtr NcclCommunicator::work_after_enqueued(std::string what, std::vector<Tensor> buffers) {
  CudaEvent done;
  done.record(context_->stream());
  return std::make_shared<NcclWork>(std::move(what), options().timeout, context_, std::move(done),
                                    std::move(buffers));
}

template <typename Call>
WorkPtr NcclCommunicator::launch(CommOp op, size_t bytes, std::vector<Tensor> buffers, Call&& call,
                                 const std::function<void(cudaStream_t)>& after_op) {
  std::string what = describe(op, bytes);
  // Every rank has the same sizes, so all skip together.
  if (bytes == 0) return std::make_shared<CompletedWork>(std::move(what), options().timeout);
  enqueue(what, std::forward<Call>(call));
  if (after_op) {
    try {
      after_op(context_->stream());
    } catch (...) {
      context_->abort();  // ends the op, which still uses the buffers about to be freed
      throw;
    }
  }
  return work_after_enqueued(std::move(what), std::move(buffers));
}

namespace {
// Offload's crossings between host and device memory, queued on the comm stream.
void copy_on_stream(const Tensor& to, const Tensor& from, cudaStream_t stream) {
  check_cuda(
      cudaMemcpyAsync(to.raw_data(), from.raw_data(), from.nbytes(), cudaMemcpyDefault, stream),
      "cudaMemcpyAsync between host and device memory");
}
}  // namespace

WorkPtr NcclCommunicator::do_all_gather(const Tensor& out, const Tensor& in) {
  // An input in host memory is copied in first, on the comm stream: queued inside `call`, ahead of
  // the NCCL call (work behind it must wait until NCCL has enqueued the op: see reduce_scatter).
  const bool copy_in = in.device().is_cpu();
  const Tensor source = copy_in ? Tensor::empty(in.shape(), in.dtype(), out.device()) : in;
  return launch(CommOp::all_gather, out.nbytes(), {out, in, source},
                [&](ncclComm_t comm, cudaStream_t s) {
                  if (copy_in) copy_on_stream(source, in, s);
                  return ncclAllGather(source.raw_data(), out.raw_data(), in.numel(),
                                       to_nccl(in.dtype()), comm, s);
                });
}

WorkPtr NcclCommunicator::do_reduce_scatter(const Tensor& out, const Tensor& in, ReduceOp op) {
  // An output in host memory is reduced into device memory, then copied out on the comm stream
  // once NCCL has enqueued the reduction (a non-blocking communicator may still be enqueuing it
  // when the call returns).
  const bool copy_out = out.device().is_cpu();
  const Tensor reduced = copy_out ? Tensor::empty(out.shape(), out.dtype(), in.device()) : out;
  std::function<void(cudaStream_t)> copy_back;
  if (copy_out) copy_back = [&](cudaStream_t s) { copy_on_stream(out, reduced, s); };
  return launch(
      CommOp::reduce_scatter, in.nbytes(), {out, in, reduced},
      [&](ncclComm_t comm, cudaStream_t s) {
        return ncclReduceScatter(in.raw_data(), reduced.raw_data(), out.numel(),
                                 to_nccl(in.dtype()), to_nccl(op), comm, s);
      },
      copy_back);
}

WorkPtr NcclCommunicator::do_all_reduce(const Tensor& buffer, ReduceOp op) {
  return launch(CommOp::all_reduce, buffer.nbytes(), {buffer},
                [&](ncclComm_t comm, cudaStream_t s) {
                  return ncclAllReduce(buffer.raw_data(), buffer.raw_data(), buffer.numel(),
                                       to_nccl(buffer.dtype()), to_nccl(op), comm, s);
                });
}

WorkPtr NcclCommunicator::do_broadcast(const Tensor& buffer, int root) {
  return launch(CommOp::broadcast, buffer.nbytes(), {buffer}, [&](ncclComm_t comm, cudaStream_t s) {
    return ncclBroadcast(buffer.raw_data(), buffer.raw_data(), buffer.numel(),
                         to_nccl(buffer.dtype()), root, comm, s);
  });
}

std::vector<WorkPtr> NcclCommunicator::do_batch_p2p(const std::vector<P2POp>& ops) {
  // Zero-byte transfers are skipped, on both sides alike since every rank knows the sizes.
  struct Transfer {
    bool sends;
    void* data;
    size_t count;
    ncclDataType_t type;
    int peer;
  };
  std::vector<Transfer> transfers;  // typed before the group opens: nothing may throw inside it
  const P2POp* first = nullptr;
  for (const P2POp& op : ops) {
    if (op.buffer.nbytes() == 0) continue;
    if (!first) first = &op;
    transfers.push_back({op.kind == P2POp::send, op.buffer.raw_data(),
                         static_cast<size_t>(op.buffer.numel()), to_nccl(op.buffer.dtype()),
                         op.peer});
  }
  if (first) {
    const std::string what = detail::concat("batch_p2p of ", transfers.size(),
                                            " transfers, the first a ", describe(*first));
    enqueue(what, [&](ncclComm_t comm, cudaStream_t s) {
      // One group: NCCL starts all of it together, so a receive issued before a send (in any
      // order within the batch) never waits on the stream for a send queued behind it.
      const auto failed = [](ncclResult_t r) { return r != ncclSuccess && r != ncclInProgress; };
      ncclResult_t result = ncclGroupStart();
      if (failed(result)) return result;
      for (const Transfer& t : transfers) {
        result = t.sends ? ncclSend(t.data, t.count, t.type, t.peer, comm, s)
                         : ncclRecv(t.data, t.count, t.type, t.peer, comm, s);
        if (failed(result)) break;
      }
      const ncclResult_t ended = ncclGroupEnd();  // closes the group, even after an error
      return failed(result) ? result : ended;
    });
  }
  // The group completes as a whole: each op's Work is done once the stream has passed it.
  std::vector<WorkPtr> works;
  for (const P2POp& op : ops) {
    if (op.buffer.nbytes() == 0)
      works.push_back(std::make_shared<CompletedWork>(describe(op), options().timeout));
    else
      works.push_back(work_after_enqueued(describe(op), {op.buffer}));
  }
  return works;
}

WorkPtr NcclCommunicator::do_all_to_all(const Tensor& out, const Tensor& in) {
  return launch(CommOp::all_to_all, in.nbytes(), {out, in}, [&](ncclComm_t comm, cudaStream_t s) {
    const size_t count = static_cast<size_t>(in.numel() / size());
    const size_t chunk_bytes = count * dtype_size(in.dtype());
    const ncclDataType_t type = to_nccl(in.dtype());
    const char* send_base = static_cast<const char*>(in.raw_data());
    char* recv_base = static_cast<char*>(out.raw_data());
    // One group, so that all pairs progress together instead of deadlocking in order.
    ncclResult_t result = ncclGroupStart();
    if (result != ncclSuccess) return result;
    for (int peer = 0; peer < size() && result == ncclSuccess; ++peer) {
      result = ncclSend(send_base + peer * chunk_bytes, count, type, peer, comm, s);
      if (result == ncclSuccess)
        result = ncclRecv(recv_base + peer * chunk_bytes, count, type, peer, comm, s);
    }
    const ncclResult_t ended = ncclGroupEnd();
    return result != ncclSuccess ? result : ended;
  });
}

WorkPtr NcclCommunicator::do_barrier() {
  int32_t* flag = context_->barrier_buffer();
  return launch(CommOp::barrier, sizeof(int32_t), {}, [&](ncclComm_t comm, cudaStream_t s) {
    return ncclAllReduce(flag, flag, 1, ncclInt32, ncclSum, comm, s);
  });
}

std::unique_ptr<Communicator> NcclCommunicator::do_split(const std::vector<int>& members, int color,
                                                         int key, std::string name) {
  const std::string what =
      detail::concat("split of group '", this->name(), "' into '", name, "' at rank ", rank(),
                     " (color ", color, ", key ", key, ")");
  context_->require_usable(what);
  context_->activate();
  ncclComm_t sub = nullptr;
  // A null config: the new communicator inherits non-blocking mode.
  check_nccl(ncclCommSplit(context_->comm(), color, key, &sub, nullptr), what);
  if (!sub) throw CommError(detail::concat(what, ": NCCL returned no communicator"));
  auto sub_context = std::make_shared<NcclContext>(sub, context_->device(), options().timeout);
  sub_context->wait_ready(what, options().timeout);
  context_->wait_ready(what, options().timeout);

  // NCCL orders the new group by key, then by rank here: the same order as members.
  const int sub_rank =
      static_cast<int>(std::find(members.begin(), members.end(), rank()) - members.begin());
  int nccl_rank = -1;
  check_nccl(ncclCommUserRank(sub, &nccl_rank), what);
  if (nccl_rank != sub_rank)
    throw CommError(detail::concat(what, ": NCCL placed this rank at ", nccl_rank,
                                   " of the new group, expected ", sub_rank));
  std::vector<int> sub_world_ranks;
  for (int member : members) sub_world_ranks.push_back(world_ranks()[member]);
  return std::make_unique<NcclCommunicator>(std::move(sub_context), sub_rank,
                                            std::move(sub_world_ranks), std::move(name), options());
}

}  // namespace meshtrain::nccl
