#include "meshtrain/core/comm/mpi/mpi_communicator.h"

#include <algorithm>
#include <exception>

#include "meshtrain/core/comm/mpi/mpi_staging.h"
#include "meshtrain/core/error.h"
#include "meshtrain/core/memory.h"

namespace meshtrain {

namespace {
constexpr int kTag = 0;  // MPI keeps messages between a pair ordered, which is all send/recv need

int comm_rank(MPI_Comm comm) {
  int rank = 0;
  mpi_check(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  return rank;
}

// A staging buffer, charged to the rank's comm category.
Tensor staging(int64_t numel, DType dtype) {
  MemoryCategoryScope scope(MemoryCategory::comm);
  return Tensor::empty({numel}, dtype);
}
}  // namespace

MpiCommunicator::MpiCommunicator(std::shared_ptr<MpiRuntime> runtime, MPI_Comm comm,
                                 std::vector<int> world_ranks, std::string name,
                                 CommOptions options)
    : Communicator(comm_rank(comm), std::move(world_ranks), std::move(name), options),
      runtime_(std::move(runtime)),
      comm_(comm),
      progress_(options.timeout) {}

MpiCommunicator::~MpiCommunicator() {
  // While an exception unwinds, the peers may never join the ops in flight: abandon them rather
  // than wait out their deadlines.
  if (progress_.shutdown(std::uncaught_exceptions() > 0)) MPI_Comm_free(&comm_);
}

void MpiCommunicator::check_buffer(const Tensor& buffer, std::string_view what) const {
  if (!buffer.defined())
    throw InvalidArgument(detail::concat(what, ": undefined tensor on group '", name(), "'"));
  if (!buffer.device().is_cpu())
    throw InvalidArgument(detail::concat(what, ": the mpi backend needs host (cpu) tensors, got ",
                                         buffer.describe(), " on group '", name(), "'"));
  mpi_count(buffer.numel(), what);
}

WorkPtr MpiCommunicator::submit(CommOp op, size_t bytes, std::function<MPI_Request()> start,
                                std::function<void(const MPI_Status&)> finish) {
  auto work = std::make_shared<AsyncWork>(describe(op, bytes), options().timeout);
  progress_.enqueue(MpiOp{work, std::move(start), std::move(finish)});
  return work;
}

WorkPtr MpiCommunicator::do_all_gather(const Tensor& out, const Tensor& in) {
  const int n = mpi_count(in.numel(), "all_gather");
  const MPI_Datatype type = mpi_datatype(in.dtype());
  // In place when in is this rank's chunk of out (FSDP's layout); other overlaps get a copy.
  const bool in_place = n > 0 && in.storage() == out.storage() &&
                        in.offset() == out.offset() + static_cast<int64_t>(rank()) * n;
  const bool copy_in = !in_place && overlaps(out, in);
  const Tensor src = copy_in ? staging(n, in.dtype()) : in;
  return submit(CommOp::all_gather, out.nbytes(), [=, comm = comm_] {
    MPI_Request request;
    if (copy_in) convert_into(src, in);
    mpi_check(MPI_Iallgather(in_place ? MPI_IN_PLACE : src.raw_data(), n, type, out.raw_data(), n,
                             type, comm, &request),
              "MPI_Iallgather");
    return request;
  });
}

WorkPtr MpiCommunicator::do_reduce_scatter(const Tensor& out, const Tensor& in, ReduceOp op) {
  check_reduction(in.dtype(), op, "reduce_scatter");
  const int n = mpi_count(out.numel(), "reduce_scatter");
  const DType acc = reduce_dtype(in.dtype());
  const bool stage_in = acc != in.dtype();
  const bool stage_out = acc != out.dtype() || overlaps(out, in);  // MPI forbids aliasing
  const Tensor send = stage_in ? staging(in.numel(), acc) : in;
  const Tensor recv = stage_out ? staging(n, acc) : out;
  const int group = size();
  return submit(
      CommOp::reduce_scatter, in.nbytes(),
      [=, comm = comm_] {
        MPI_Request request;
        if (stage_in) convert_into(send, in);
        mpi_check(MPI_Ireduce_scatter_block(send.raw_data(), recv.raw_data(), n, mpi_datatype(acc),
                                            mpi_reduce_op(op), comm, &request),
                  "MPI_Ireduce_scatter_block");
        return request;
      },
      [=](const MPI_Status&) {
        if (op == ReduceOp::avg) divide_(recv, group);
        if (stage_out) convert_into(out, recv);
      });
}

WorkPtr MpiCommunicator::do_all_reduce(const Tensor& buffer, ReduceOp op) {
  check_reduction(buffer.dtype(), op, "all_reduce");
  const int n = mpi_count(buffer.numel(), "all_reduce");
  const DType acc = reduce_dtype(buffer.dtype());
  const bool stage = acc != buffer.dtype();
  const Tensor acc_buffer = stage ? staging(n, acc) : buffer;
  const int group = size();
  return submit(
      CommOp::all_reduce, buffer.nbytes(),
      [=, comm = comm_] {
        MPI_Request request;
        if (stage) convert_into(acc_buffer, buffer);
        mpi_check(MPI_Iallreduce(MPI_IN_PLACE, acc_buffer.raw_data(), n, mpi_datatype(acc),
                                 mpi_reduce_op(op), comm, &request),
                  "MPI_Iallreduce");
        return request;
      },
      [=](const MPI_Status&) {
        if (op == ReduceOp::avg) divide_(acc_buffer, group);
        if (stage) convert_into(buffer, acc_buffer);
      });
}

WorkPtr MpiCommunicator::do_broadcast(const Tensor& buffer, int root) {
  const int n = mpi_count(buffer.numel(), "broadcast");
  return submit(CommOp::broadcast, buffer.nbytes(), [=, comm = comm_] {
    MPI_Request request;
    mpi_check(MPI_Ibcast(buffer.raw_data(), n, mpi_datatype(buffer.dtype()), root, comm, &request),
              "MPI_Ibcast");
    return request;
  });
}

MpiOp MpiCommunicator::p2p_op(const P2POp& op) const {
  const Tensor buffer = op.buffer;
  const int peer = op.peer;
  const int n = mpi_count(buffer.numel(), "point-to-point");
  const MPI_Datatype type = mpi_datatype(buffer.dtype());
  auto work = std::make_shared<AsyncWork>(describe(op), options().timeout);
  if (op.kind == P2POp::send) {
    auto start = [=, comm = comm_] {
      MPI_Request request;
      mpi_check(MPI_Isend(buffer.raw_data(), n, type, peer, kTag, comm, &request), "MPI_Isend");
      return request;
    };
    return MpiOp{std::move(work), std::move(start), {}};
  }
  auto start = [=, comm = comm_] {
    MPI_Request request;
    mpi_check(MPI_Irecv(buffer.raw_data(), n, type, peer, kTag, comm, &request), "MPI_Irecv");
    return request;
  };
  // MPI takes a shorter message than the buffer silently, which would leave stale data behind;
  // the sizes must match exactly, as on the other backends.
  auto check_size = [buffer, peer, what = work->description()](const MPI_Status& status) {
    int bytes = 0;
    mpi_check(MPI_Get_count(&status, MPI_BYTE, &bytes), "MPI_Get_count");
    if (static_cast<size_t>(bytes) != buffer.nbytes())
      throw CommError(detail::concat(what, ": rank ", peer, " sent ", bytes,
                                     " bytes but this recv expects ", buffer.nbytes(), " bytes (",
                                     dtype_name(buffer.dtype()), ")"));
  };
  return MpiOp{std::move(work), std::move(start), std::move(check_size)};
}

std::vector<WorkPtr> MpiCommunicator::do_batch_p2p(const std::vector<P2POp>& ops) {
  std::vector<MpiOp> batch;
  std::vector<WorkPtr> works;
  for (const P2POp& op : ops) {
    batch.push_back(p2p_op(op));
    works.push_back(batch.back().work);
  }
  // Posted together and in order, so that messages between a pair match in issue order.
  progress_.enqueue(std::move(batch));
  return works;
}

WorkPtr MpiCommunicator::do_all_to_all(const Tensor& out, const Tensor& in) {
  const int chunk = mpi_count(in.numel() / size(), "all_to_all");
  const MPI_Datatype type = mpi_datatype(in.dtype());
  const bool copy_in = overlaps(out, in);  // MPI forbids aliasing
  const Tensor src = copy_in ? staging(in.numel(), in.dtype()) : in;
  return submit(CommOp::all_to_all, in.nbytes(), [=, comm = comm_] {
    MPI_Request request;
    if (copy_in) convert_into(src, in);
    mpi_check(
        MPI_Ialltoall(src.raw_data(), chunk, type, out.raw_data(), chunk, type, comm, &request),
        "MPI_Ialltoall");
    return request;
  });
}

WorkPtr MpiCommunicator::do_barrier() {
  return submit(CommOp::barrier, 0, [comm = comm_] {
    MPI_Request request;
    mpi_check(MPI_Ibarrier(comm, &request), "MPI_Ibarrier");
    return request;
  });
}

std::unique_ptr<Communicator> MpiCommunicator::do_split(const std::vector<int>& members, int color,
                                                        int key, std::string name) {
  // Blocking, but every member has just completed split()'s all-gather, so all of them get here.
  MPI_Comm sub;
  mpi_check(MPI_Comm_split(comm_, color, key, &sub), "MPI_Comm_split");
  mpi_check(MPI_Comm_set_errhandler(sub, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  int sub_size = 0;
  mpi_check(MPI_Comm_size(sub, &sub_size), "MPI_Comm_size");
  const auto self = std::find(members.begin(), members.end(), rank());
  if (sub_size != static_cast<int>(members.size()) || self == members.end() ||
      comm_rank(sub) != self - members.begin()) {
    MPI_Comm_free(&sub);
    throw CommError(detail::concat("split of group '", this->name(), "' into '", name,
                                   "': MPI formed a group of ", sub_size, " ranks, expected ",
                                   members.size()));
  }
  std::vector<int> world;
  for (int m : members) world.push_back(world_ranks()[m]);
  return std::make_unique<MpiCommunicator>(runtime_, sub, std::move(world), std::move(name),
                                           options());
}

}  // namespace meshtrain
