#include "tests/comm/collective_checks.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "meshtrain/core/bf16.h"
#include "meshtrain/core/error.h"

namespace meshtrain::testing {

namespace {

// Fails (without ending the rank: its peers still expect it in later ops) when counters differ.
void expect_counters(const Communicator& comm, CommOp op, uint64_t sent, uint64_t received,
                     uint64_t calls = 1) {
  const CommCounters& c = comm.counters();
  EXPECT_EQ(c.sent(op), sent) << comm_op_name(op) << " bytes sent at rank " << comm.rank();
  EXPECT_EQ(c.received(op), received)
      << comm_op_name(op) << " bytes received at rank " << comm.rank();
  EXPECT_EQ(c.count(op), calls) << comm_op_name(op) << " calls at rank " << comm.rank();
}

uint64_t bytes_of(int64_t count, DType dtype) {
  return static_cast<uint64_t>(count) * dtype_size(dtype);
}

// The bus volume of the ring algorithm: (W-1)/W of the full buffer.
uint64_t ring_share(uint64_t full_bytes, int world) { return full_bytes * (world - 1) / world; }

}  // namespace

float contribution(int rank, int world_size, int64_t i) {
  return static_cast<float>(i % 13 + 2 * ((rank + i) % world_size));
}

Tensor filled(int64_t n, DType dtype, const std::function<float(int64_t)>& value) {
  Tensor t = Tensor::empty({n}, dtype);
  switch (dtype) {
    case DType::f32: {
      float* p = t.data<float>();
      for (int64_t i = 0; i < n; ++i) p[i] = value(i);
      break;
    }
    case DType::bf16: {
      BF16* p = t.data<BF16>();
      for (int64_t i = 0; i < n; ++i) p[i] = to_bf16(value(i));
      break;
    }
    case DType::i32: {
      int32_t* p = t.data<int32_t>();
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<int32_t>(value(i));
      break;
    }
  }
  return t;
}

Tensor filled(int64_t n, DType dtype, Device device, const std::function<float(int64_t)>& value) {
  return filled(n, dtype, value).on(device);
}

void expect_values(const Tensor& actual, const std::function<float(int64_t)>& expected,
                   const char* what) {
  const std::vector<float> got = actual.to_vector();
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != expected(static_cast<int64_t>(i))) {
      ADD_FAILURE() << what << ": element " << i << " of " << got.size() << " is " << got[i]
                    << ", expected " << expected(static_cast<int64_t>(i));
      return;
    }
  }
}

void check_all_gather(Communicator& comm, int64_t count, DType dtype, Device device) {
  const int w = comm.size();
  const int r = comm.rank();
  comm.reset_counters();
  Tensor in = filled(count, dtype, device, [&](int64_t i) { return contribution(r, w, i); });
  Tensor out = filled(w * count, dtype, device, [](int64_t) { return -1.0f; });
  comm.all_gather_into(out, in)->wait();
  expect_values(out,
                [&](int64_t i) { return contribution(static_cast<int>(i / count), w, i % count); },
                "all_gather");
  const uint64_t moved = ring_share(bytes_of(w * count, dtype), w);
  expect_counters(comm, CommOp::all_gather, moved, moved);
}

void check_reduce_scatter(Communicator& comm, int64_t count, DType dtype, ReduceOp op,
                          Device device) {
  const int w = comm.size();
  const int r = comm.rank();
  comm.reset_counters();
  Tensor in = filled(w * count, dtype, device, [&](int64_t i) { return contribution(r, w, i); });
  Tensor out = filled(count, dtype, device, [](int64_t) { return -1.0f; });
  comm.reduce_scatter_into(out, in, op)->wait();
  expect_values(
      out,
      [&](int64_t i) {
        const int64_t g = r * count + i;  // element of the full buffer this rank holds
        switch (op) {
          case ReduceOp::sum: return static_cast<float>(w * (g % 13) + w * (w - 1));
          case ReduceOp::avg: return static_cast<float>(g % 13 + w - 1);
          case ReduceOp::max: return static_cast<float>(g % 13 + 2 * (w - 1));
        }
        return 0.0f;
      },
      "reduce_scatter");
  const uint64_t moved = ring_share(bytes_of(w * count, dtype), w);
  expect_counters(comm, CommOp::reduce_scatter, moved, moved);
}

void check_all_reduce(Communicator& comm, int64_t count, DType dtype, ReduceOp op, Device device) {
  const int w = comm.size();
  const int r = comm.rank();
  comm.reset_counters();
  Tensor buffer = filled(count, dtype, device, [&](int64_t i) { return contribution(r, w, i); });
  comm.all_reduce(buffer, op)->wait();
  expect_values(
      buffer,
      [&](int64_t i) {
        switch (op) {
          case ReduceOp::sum: return static_cast<float>(w * (i % 13) + w * (w - 1));
          case ReduceOp::avg: return static_cast<float>(i % 13 + w - 1);
          case ReduceOp::max: return static_cast<float>(i % 13 + 2 * (w - 1));
        }
        return 0.0f;
      },
      "all_reduce");
  const uint64_t moved = 2 * bytes_of(count, dtype) * (w - 1) / w;
  expect_counters(comm, CommOp::all_reduce, moved, moved);
}

void check_broadcast(Communicator& comm, int64_t count, DType dtype, int root, Device device) {
  const int w = comm.size();
  const int r = comm.rank();
  comm.reset_counters();
  Tensor buffer = filled(count, dtype, device, [&](int64_t i) {
    return r == root ? contribution(root, w, i) : -1.0f;
  });
  comm.broadcast(buffer, root)->wait();
  expect_values(buffer, [&](int64_t i) { return contribution(root, w, i); }, "broadcast");
  const uint64_t bytes = bytes_of(count, dtype);
  expect_counters(comm, CommOp::broadcast, r == root && w > 1 ? bytes : 0, r == root ? 0 : bytes);
}

void check_send_recv_ring(Communicator& comm, int64_t count, DType dtype, Device device) {
  const int w = comm.size();
  if (w == 1) return;  // no peer to talk to
  const int r = comm.rank();
  const int next = (r + 1) % w;
  const int prev = (r + w - 1) % w;
  comm.reset_counters();
  // The second message differs from the first, so a swap shows.
  Tensor first = filled(count, dtype, device, [&](int64_t i) { return contribution(r, w, i); });
  Tensor second =
      filled(count, dtype, device, [&](int64_t i) { return contribution(r, w, i) + 30; });
  Tensor got_first = filled(count, dtype, device, [](int64_t) { return -1.0f; });
  Tensor got_second = filled(count, dtype, device, [](int64_t) { return -1.0f; });
  std::vector<WorkPtr> works{comm.send(first, next), comm.send(second, next),
                             comm.recv(got_first, prev), comm.recv(got_second, prev)};
  for (const WorkPtr& work : works) work->wait();
  expect_values(got_first, [&](int64_t i) { return contribution(prev, w, i); }, "first recv");
  expect_values(got_second, [&](int64_t i) { return contribution(prev, w, i) + 30; },
                "second recv");
  const uint64_t bytes = bytes_of(count, dtype);
  expect_counters(comm, CommOp::send, 2 * bytes, 0, 2);
  expect_counters(comm, CommOp::recv, 0, 2 * bytes, 2);
}

void check_all_to_all(Communicator& comm, int64_t count, DType dtype, Device device) {
  const int w = comm.size();
  const int r = comm.rank();
  comm.reset_counters();
  Tensor in = filled(w * count, dtype, device, [&](int64_t i) { return contribution(r, w, i); });
  Tensor out = filled(w * count, dtype, device, [](int64_t) { return -1.0f; });
  comm.all_to_all(out, in)->wait();
  // Chunk j of out is chunk r of rank j's in.
  expect_values(
      out,
      [&](int64_t i) {
        return contribution(static_cast<int>(i / count), w, r * count + i % count);
      },
      "all_to_all");
  const uint64_t moved = ring_share(bytes_of(w * count, dtype), w);
  expect_counters(comm, CommOp::all_to_all, moved, moved);
}

void check_barrier(Communicator& comm) {
  comm.reset_counters();
  for (int i = 0; i < 3; ++i) comm.barrier()->wait();
  expect_counters(comm, CommOp::barrier, 0, 0, 3);
}

void check_async_overlap(Communicator& comm, int64_t count, DType dtype, Device device) {
  const int w = comm.size();
  const int r = comm.rank();
  Tensor gather_in = filled(count, dtype, device, [&](int64_t i) { return contribution(r, w, i); });
  Tensor gathered = Tensor::empty({w * count}, dtype, device);
  Tensor scatter_in =
      filled(w * count, dtype, device, [&](int64_t i) { return contribution(r, w, i); });
  Tensor scattered = Tensor::empty({count}, dtype, device);
  Tensor reduced = filled(count, dtype, device, [&](int64_t i) { return contribution(r, w, i); });
  Tensor broadcasted =
      filled(count, dtype, device, [&](int64_t i) { return contribution(r, w, i); });
  std::vector<WorkPtr> works{comm.all_gather_into(gathered, gather_in),
                             comm.reduce_scatter_into(scattered, scatter_in, ReduceOp::sum),
                             comm.all_reduce(reduced, ReduceOp::max),
                             comm.broadcast(broadcasted, w - 1), comm.barrier()};
  for (auto it = works.rbegin(); it != works.rend(); ++it) (*it)->wait();
  expect_values(gathered,
                [&](int64_t i) { return contribution(static_cast<int>(i / count), w, i % count); },
                "overlapped all_gather");
  expect_values(
      scattered,
      [&](int64_t i) { return static_cast<float>(w * ((r * count + i) % 13) + w * (w - 1)); },
      "overlapped reduce_scatter");
  expect_values(reduced, [&](int64_t i) { return static_cast<float>(i % 13 + 2 * (w - 1)); },
                "overlapped all_reduce");
  expect_values(broadcasted, [&](int64_t i) { return contribution(w - 1, w, i); },
                "overlapped broadcast");

  // Completes with no one waiting on it: the op runs beside the caller.
  Tensor polled = filled(count, dtype, device, [&](int64_t i) { return contribution(r, w, i); });
  WorkPtr work = comm.all_reduce(polled, ReduceOp::sum);
  const auto deadline = std::chrono::steady_clock::now() + comm.options().timeout;
  while (!work->is_completed() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  EXPECT_TRUE(work->is_completed()) << "all_reduce made no progress while the caller polled";
  work->wait();
}

}  // namespace meshtrain::testing
