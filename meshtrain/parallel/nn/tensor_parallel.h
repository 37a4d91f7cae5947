// TensorParallel: the tp group a module computes over, and the conjugate operators that enter and
// leave a tensor-parallel region (f and g of Megatron-LM, Shoeybi et al. 2019, §3), in their
// sequence-parallel forms when that is on (Korthikanti et al. 2022):
//
//              forward                      backward
//   enter      identity | all-gather rows   all-reduce | reduce-scatter rows
//   leave      all-reduce | reduce-scatter  identity | all-gather rows
//
// Under sequence parallelism the token rows [rows, C] outside the tensor-parallel regions (the
// LayerNorms, residual adds, embeddings) are split over tp: rank t holds the t-th contiguous
// chunk of rows, so gathers and scatters are flat collectives with no reordering. A group of one
// (no tensor parallelism) makes every operator the identity.
#pragma once

#include <cstdint>

#include "meshtrain/core/comm/communicator.h"
#include "meshtrain/mesh/shard_math.h"

namespace meshtrain::nn {

struct TensorParallel {
  Communicator* comm = nullptr;  // null: a group of one
  bool sequence_parallel = false;

  int size() const { return comm ? comm->size() : 1; }
  int rank() const { return comm ? comm->rank() : 0; }
  // The token rows this rank holds outside the tensor-parallel regions: all of them, or its
  // chunk under sequence parallelism (rows must divide by the group size then).
  ShardRange local_rows(int64_t rows) const;
  bool splits_rows() const { return sequence_parallel && size() > 1; }

  Tensor enter(const Tensor& x) const;
  Tensor enter_backward(const Tensor& d_x) const;
  Tensor leave(const Tensor& partial) const;
  Tensor leave_backward(const Tensor& d_y) const;

  // Sums `t` over the group in place (gradients of replicated weights that saw only some rows).
  void all_reduce(const Tensor& t) const;
  // [rows / size, C] -> [rows, C], every rank's rows in rank order.
  Tensor gather_rows(const Tensor& local) const;
  // [rows, C] -> [rows / size, C]: this rank's rows of the sum over the group.
  Tensor reduce_scatter_rows(const Tensor& full) const;
};

}  // namespace meshtrain::nn
