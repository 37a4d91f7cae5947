#include "tests/comm/p2p_checks.h"

#include <gtest/gtest.h>

#include <vector>

#include "tests/comm/collective_checks.h"

namespace meshtrain::testing {

namespace {

// Message k from rank src: distinct per sender and per message, exact in bf16 (at most 86).
float message(int src, int world, int k, int64_t i) {
  return contribution(src, world, i) + 20.0f * static_cast<float>(k);
}

Tensor on_comm_device(const Communicator& comm, const Tensor& host) {
  return host.on(comm.exchange_device());
}

Tensor outgoing(const Communicator& comm, int64_t n, DType dtype, int k) {
  return on_comm_device(comm, filled(n, dtype, [&](int64_t i) {
                          return message(comm.rank(), comm.size(), k, i);
                        }));
}

Tensor incoming(const Communicator& comm, int64_t n, DType dtype) {
  return on_comm_device(comm, filled(n, dtype, [](int64_t) { return -1.0f; }));
}

void expect_message(const Tensor& got, int src, int world, int k, const char* what) {
  const Tensor host = got.on(Device::cpu());
  expect_values(host, [&](int64_t i) { return message(src, world, k, i); }, what);
}

// Issues every op, in order, before waiting on any; then waits on them last to first, so that
// no wait happens in issue order and a receive that holds up later ops shows as a timeout.
void run(Communicator& comm, const std::vector<P2POp>& ops, P2PIssue issue) {
  std::vector<WorkPtr> works;
  if (issue == P2PIssue::batched) {
    works = comm.batch_p2p(ops);
  } else {
    for (const P2POp& op : ops)
      works.push_back(op.kind == P2POp::send ? comm.send(op.buffer, op.peer)
                                             : comm.recv(op.buffer, op.peer));
  }
  ASSERT_EQ(works.size(), ops.size()) << "one Work per op";
  for (auto it = works.rbegin(); it != works.rend(); ++it) (*it)->wait();
}

// Byte counts and calls of the send and recv counters since the last reset.
void expect_p2p_counters(const Communicator& comm, uint64_t sent, uint64_t sends,
                         uint64_t received, uint64_t recvs) {
  const CommCounters& c = comm.counters();
  EXPECT_EQ(c.sent(CommOp::send), sent) << "bytes sent at rank " << comm.rank();
  EXPECT_EQ(c.count(CommOp::send), sends) << "send calls at rank " << comm.rank();
  EXPECT_EQ(c.received(CommOp::recv), received) << "bytes received at rank " << comm.rank();
  EXPECT_EQ(c.count(CommOp::recv), recvs) << "recv calls at rank " << comm.rank();
  EXPECT_EQ(c.received(CommOp::send) + c.sent(CommOp::recv), 0u);
}

}  // namespace

void check_recv_first_ring(Communicator& comm, int64_t count, DType dtype, P2PIssue issue) {
  const int w = comm.size();
  if (w == 1) return;  // no neighbour
  const int r = comm.rank();
  const int next = (r + 1) % w;
  const int prev = (r + w - 1) % w;
  comm.reset_counters();
  const Tensor got = incoming(comm, count, dtype);
  const Tensor mine = outgoing(comm, count, dtype, 0);
  run(comm, {{P2POp::recv, got, prev}, {P2POp::send, mine, next}}, issue);
  expect_message(got, prev, w, 0, "ring recv");
  expect_p2p_counters(comm, mine.nbytes(), 1, got.nbytes(), 1);
}

void check_recv_first_pairs(Communicator& comm, int64_t count, DType dtype, P2PIssue issue) {
  const int w = comm.size();
  const int r = comm.rank();
  const int partner = r ^ 1;
  if (partner >= w) return;  // the last rank of an odd world
  comm.reset_counters();
  const Tensor got0 = incoming(comm, count, dtype);
  const Tensor got1 = incoming(comm, count, dtype);
  const Tensor mine0 = outgoing(comm, count, dtype, 0);
  const Tensor mine1 = outgoing(comm, count, dtype, 1);
  run(comm,
      {{P2POp::recv, got0, partner},
       {P2POp::recv, got1, partner},
       {P2POp::send, mine0, partner},
       {P2POp::send, mine1, partner}},
      issue);
  // Messages between a pair arrive in the order they were sent.
  expect_message(got0, partner, w, 0, "first message of the pair");
  expect_message(got1, partner, w, 1, "second message of the pair");
  expect_p2p_counters(comm, 2 * mine0.nbytes(), 2, 2 * got0.nbytes(), 2);
}

void check_pipeline_step(Communicator& comm, int64_t count, DType dtype, P2PIssue issue) {
  const int w = comm.size();
  const int r = comm.rank();
  const bool has_prev = r > 0;
  const bool has_next = r + 1 < w;
  const int64_t grad_count = count + 3;
  comm.reset_counters();
  const Tensor act_in0 = incoming(comm, count, dtype);
  const Tensor act_in1 = incoming(comm, count, dtype);
  const Tensor grad_in = incoming(comm, grad_count, dtype);
  const Tensor act_out0 = outgoing(comm, count, dtype, 0);
  const Tensor act_out1 = outgoing(comm, count, dtype, 1);
  const Tensor grad_out = outgoing(comm, grad_count, dtype, 2);
  std::vector<P2POp> ops;
  if (has_prev) {
    ops.push_back({P2POp::recv, act_in0, r - 1});
    ops.push_back({P2POp::recv, act_in1, r - 1});
  }
  if (has_next) ops.push_back({P2POp::recv, grad_in, r + 1});
  if (has_next) {
    ops.push_back({P2POp::send, act_out0, r + 1});
    ops.push_back({P2POp::send, act_out1, r + 1});
  }
  if (has_prev) ops.push_back({P2POp::send, grad_out, r - 1});
  run(comm, ops, issue);
  if (has_prev) {
    expect_message(act_in0, r - 1, w, 0, "first activation");
    expect_message(act_in1, r - 1, w, 1, "second activation");
  }
  if (has_next) expect_message(grad_in, r + 1, w, 2, "gradient");
  const uint64_t act = act_out0.nbytes();
  const uint64_t grad = grad_out.nbytes();
  expect_p2p_counters(comm, (has_next ? 2 * act : 0) + (has_prev ? grad : 0),
                      (has_next ? 2 : 0) + (has_prev ? 1 : 0),
                      (has_prev ? 2 * act : 0) + (has_next ? grad : 0),
                      (has_prev ? 2 : 0) + (has_next ? 1 : 0));
}

}  // namespace meshtrain::testing
