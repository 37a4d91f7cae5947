#include "meshtrain/parallel/nn/tensor_parallel.h"

#include "meshtrain/core/error.h"

namespace meshtrain::nn {

ShardRange TensorParallel::local_rows(int64_t rows) const {
  if (!splits_rows()) return {0, rows};
  MT_CHECK(rows % size() == 0, "sequence parallelism splits the ", rows,
           " token rows of a micro-batch (sequences x tokens) over tp=", size(),
           "; choose a micro-batch whose token count divides by tp");
  const int64_t chunk = rows / size();
  return {rank() * chunk, chunk};
}

void TensorParallel::all_reduce(const Tensor& t) const {
  if (size() > 1) comm->all_reduce(t, ReduceOp::sum)->wait();
}

Tensor TensorParallel::gather_rows(const Tensor& local) const {
  if (size() == 1) return local;
  MT_CHECK(local.ndim() == 2, "gather_rows: token rows must be [rows, C], got ", local.describe());
  Tensor full = Tensor::empty({local.dim(0) * size(), local.dim(1)}, local.dtype(), local.device());
  comm->all_gather_into(full, local)->wait();
  return full;
}

Tensor TensorParallel::reduce_scatter_rows(const Tensor& full) const {
  if (size() == 1) return full;
  MT_CHECK(full.ndim() == 2, "reduce_scatter_rows: token rows must be [rows, C], got ",
           full.describe());
  const int64_t rows = local_rows(full.dim(0)).size;
  Tensor mine = Tensor::empty({rows, full.dim(1)}, full.dtype(), full.device());
  comm->reduce_scatter_into(mine, full, ReduceOp::sum)->wait();
  return mine;
}

Tensor TensorParallel::enter(const Tensor& x) const {
  return sequence_parallel ? gather_rows(x) : x;
}

Tensor TensorParallel::enter_backward(const Tensor& d_x) const {
  if (sequence_parallel) return reduce_scatter_rows(d_x);
  all_reduce(d_x);
  return d_x;
}

Tensor TensorParallel::leave(const Tensor& partial) const {
  if (sequence_parallel) return reduce_scatter_rows(partial);
  all_reduce(partial);
  return partial;
}

Tensor TensorParallel::leave_backward(const Tensor& d_y) const {
  return sequence_parallel ? gather_rows(d_y) : d_y;
}

}  // namespace meshtrain::nn
