// Per-rank checks of every collective against closed-form values, for any backend. Each function
// is called by every rank of `comm` (in the same order) and asserts with gtest on its own rank's
// results and byte counters. Used by the local backend's tests and, under mpirun, by the MPI ones.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "meshtrain/core/comm/communicator.h"
#include "meshtrain/core/tensor.h"

namespace meshtrain::testing {

// What rank r of W contributes at element i: small integers, so values, sums, averages and maxima
// over up to 8 ranks are exact in f32 and bf16. Every rank's value differs at each i, and which
// rank holds the maximum changes with i.
float contribution(int rank, int world_size, int64_t i);

// A host tensor of n elements with value(i) at i; the same on `device`.
Tensor filled(int64_t n, DType dtype, const std::function<float(int64_t)>& value);
Tensor filled(int64_t n, DType dtype, Device device, const std::function<float(int64_t)>& value);
// Adds one failure naming `what` and the first differing element, if any.
void expect_values(const Tensor& actual, const std::function<float(int64_t)>& expected,
                   const char* what);

// Buffers live on `device` (the local backend moves host and CUDA buffers alike).
// count: elements each rank contributes (all_gather), receives (reduce_scatter), holds
// (all_reduce, broadcast, send/recv) or sends to each peer (all_to_all).
void check_all_gather(Communicator& comm, int64_t count, DType dtype,
                      Device device = Device::cpu());
void check_reduce_scatter(Communicator& comm, int64_t count, DType dtype, ReduceOp op,
                          Device device = Device::cpu());
void check_all_reduce(Communicator& comm, int64_t count, DType dtype, ReduceOp op,
                      Device device = Device::cpu());
void check_broadcast(Communicator& comm, int64_t count, DType dtype, int root,
                     Device device = Device::cpu());
// Two messages from every rank to the next, received in order (FIFO per pair).
void check_send_recv_ring(Communicator& comm, int64_t count, DType dtype,
                          Device device = Device::cpu());
void check_all_to_all(Communicator& comm, int64_t count, DType dtype,
                      Device device = Device::cpu());
void check_barrier(Communicator& comm);
// Issues several ops before waiting on any (in reverse order), and checks that an op completes
// while the caller only polls, i.e. that ops progress beside the caller's compute.
void check_async_overlap(Communicator& comm, int64_t count, DType dtype,
                         Device device = Device::cpu());

}  // namespace meshtrain::testing
