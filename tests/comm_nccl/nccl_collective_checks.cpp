#include "tests/comm_nccl/nccl_collective_checks.h"

#include <gtest/gtest.h>

#include "meshtrain/core/error.h"
#include "tests/comm_nccl/nccl_test_support.h"

namespace meshtrain::nccl_test {

namespace {
constexpr float kUnwritten = -1.0f;  // what output buffers hold before an op fills them

float coefficient(int64_t i) { return static_cast<float>(i % 7 + 1); }

// Sum, average or maximum over all ranks of contribution(rank, i).
float reduced(ReduceOp op, int world, int64_t i) {
  switch (op) {
    case ReduceOp::sum: return world * (world + 1) / 2 * coefficient(i);
    case ReduceOp::avg: return (world + 1) / 2.0f * coefficient(i);
    case ReduceOp::max: return world * coefficient(i);
  }
  return 0.0f;
}

// The op was called once more, with the given bytes counted since before.
void expect_counted(const Communicator& comm, const CommCounters& before, CommOp op, uint64_t sent,
                    uint64_t received) {
  const CommCounters& after = comm.counters();
  EXPECT_EQ(after.count(op), before.count(op) + 1) << comm_op_name(op);
  EXPECT_EQ(after.sent(op) - before.sent(op), sent) << comm_op_name(op) << " bytes sent";
  EXPECT_EQ(after.received(op) - before.received(op), received)
      << comm_op_name(op) << " bytes received";
}

std::string where(const Communicator& comm, DType dtype, int64_t n) {
  return detail::concat(" (rank ", comm.rank(), " of ", comm.size(), ", ", dtype_name(dtype),
                        ", n = ", n, ")");
}
}  // namespace

float contribution(int rank, int64_t i) { return static_cast<float>(rank + 1) * coefficient(i); }

void check_all_gather(Communicator& comm, Device device, DType dtype, int64_t n) {
  const int rank = comm.rank();
  const int world = comm.size();
  const Tensor in = filled(n, dtype, device, [&](int64_t i) { return contribution(rank, i); });
  const Tensor out = filled(n * world, dtype, device, [](int64_t) { return kUnwritten; });
  const CommCounters before = comm.counters();
  comm.all_gather_into(out, in)->wait();
  EXPECT_TRUE(holds(out, [&](int64_t j) { return contribution(j / n, j % n); }))
      << "all_gather" << where(comm, dtype, n);
  const uint64_t moved = in.nbytes() * (world - 1);
  expect_counted(comm, before, CommOp::all_gather, moved, moved);
}

void check_reduce_scatter(Communicator& comm, Device device, DType dtype, int64_t n, ReduceOp op) {
  const int rank = comm.rank();
  const int world = comm.size();
  const Tensor in =
      filled(n * world, dtype, device, [&](int64_t j) { return contribution(rank, j); });
  const Tensor out = filled(n, dtype, device, [](int64_t) { return kUnwritten; });
  const CommCounters before = comm.counters();
  comm.reduce_scatter_into(out, in, op)->wait();
  EXPECT_TRUE(holds(out, [&](int64_t i) { return reduced(op, world, rank * n + i); }))
      << "reduce_scatter " << reduce_op_name(op) << where(comm, dtype, n);
  const uint64_t moved = out.nbytes() * (world - 1);
  expect_counted(comm, before, CommOp::reduce_scatter, moved, moved);
}

void check_all_reduce(Communicator& comm, Device device, DType dtype, int64_t n, ReduceOp op) {
  const int rank = comm.rank();
  const int world = comm.size();
  const Tensor buffer = filled(n, dtype, device, [&](int64_t i) { return contribution(rank, i); });
  const CommCounters before = comm.counters();
  comm.all_reduce(buffer, op)->wait();
  EXPECT_TRUE(holds(buffer, [&](int64_t i) { return reduced(op, world, i); }))
      << "all_reduce " << reduce_op_name(op) << where(comm, dtype, n);
  const uint64_t moved = 2 * buffer.nbytes() * (world - 1) / world;
  expect_counted(comm, before, CommOp::all_reduce, moved, moved);
}

void check_broadcast(Communicator& comm, Device device, DType dtype, int64_t n, int root) {
  const int rank = comm.rank();
  const Tensor buffer = filled(n, dtype, device, [&](int64_t i) {
    return rank == root ? contribution(root, i) : kUnwritten;
  });
  const CommCounters before = comm.counters();
  comm.broadcast(buffer, root)->wait();
  EXPECT_TRUE(holds(buffer, [&](int64_t i) { return contribution(root, i); }))
      << "broadcast from " << root << where(comm, dtype, n);
  const bool sends = rank == root && comm.size() > 1;
  expect_counted(comm, before, CommOp::broadcast, sends ? buffer.nbytes() : 0,
                 rank == root ? 0 : buffer.nbytes());
}

void check_all_to_all(Communicator& comm, Device device, DType dtype, int64_t n) {
  const int rank = comm.rank();
  const int world = comm.size();
  // Element i of the chunk that rank `from` sends to rank `to`; at most 63 * 4 + 3 = 255.
  const auto element = [&](int from, int to, int64_t i) {
    return static_cast<float>((from * world + to) * 4 + i % 4);
  };
  const Tensor in =
      filled(n * world, dtype, device, [&](int64_t j) { return element(rank, j / n, j % n); });
  const Tensor out = filled(n * world, dtype, device, [](int64_t) { return kUnwritten; });
  const CommCounters before = comm.counters();
  comm.all_to_all(out, in)->wait();
  EXPECT_TRUE(holds(out, [&](int64_t j) { return element(j / n, rank, j % n); }))
      << "all_to_all" << where(comm, dtype, n);
  const uint64_t moved = in.nbytes() / world * (world - 1);
  expect_counted(comm, before, CommOp::all_to_all, moved, moved);
}

void check_barrier(Communicator& comm) {
  const CommCounters before = comm.counters();
  const WorkPtr work = comm.barrier();
  work->wait();
  EXPECT_TRUE(work->is_completed());
  expect_counted(comm, before, CommOp::barrier, 0, 0);
}

void check_every_op(Communicator& comm, Device device, DType dtype, int64_t n) {
  check_all_gather(comm, device, dtype, n);
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max}) {
    check_reduce_scatter(comm, device, dtype, n, op);
    check_all_reduce(comm, device, dtype, n, op);
  }
  check_broadcast(comm, device, dtype, n, 0);
  check_broadcast(comm, device, dtype, n, comm.size() - 1);
  check_all_to_all(comm, device, dtype, n);
  check_barrier(comm);
}

}  // namespace meshtrain::nccl_test
