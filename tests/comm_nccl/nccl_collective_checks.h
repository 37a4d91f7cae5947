// Closed-form checks of the ops of a nccl communicator at any world size W. Rank r contributes
// (r + 1) * (i % 7 + 1) at element i, so sums stay at most 36 * 7 = 252 up to 8 ranks and every
// sum, average and maximum is exact in bf16. Each check runs one op with buffers on the given
// device, waits, compares every element on this rank and checks the op's byte counters.
#pragma once

#include <cstdint>

#include "meshtrain/core/comm/communicator.h"

namespace meshtrain::nccl_test {

float contribution(int rank, int64_t i);

// n: elements each rank contributes (all-gather, all-to-all) or receives (reduce-scatter).
void check_all_gather(Communicator& comm, Device device, DType dtype, int64_t n);
void check_reduce_scatter(Communicator& comm, Device device, DType dtype, int64_t n, ReduceOp op);
void check_all_reduce(Communicator& comm, Device device, DType dtype, int64_t n, ReduceOp op);
void check_broadcast(Communicator& comm, Device device, DType dtype, int64_t n, int root);
void check_all_to_all(Communicator& comm, Device device, DType dtype, int64_t n);
void check_barrier(Communicator& comm);
// Every check above: each reduction, the first and the last rank as root.
void check_every_op(Communicator& comm, Device device, DType dtype, int64_t n);

}  // namespace meshtrain::nccl_test
