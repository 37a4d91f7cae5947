// Helpers of the mpi backend: MPI datatypes and ops for meshtrain's, f32 staging of bf16
// reductions, and the aliasing checks MPI needs (it forbids overlapping send and receive buffers).
#pragma once

#include <mpi.h>

#include "meshtrain/core/comm/types.h"
#include "meshtrain/core/tensor.h"

namespace meshtrain {

MPI_Datatype mpi_datatype(DType dtype);
// avg reduces as a sum; the caller divides by the group size afterwards.
MPI_Op mpi_reduce_op(ReduceOp op);
// The dtype a reduction runs in: bf16 accumulates in f32.
DType reduce_dtype(DType dtype);
// Rejects reductions that meshtrain does not define (avg over i32).
void check_reduction(DType dtype, ReduceOp op, std::string_view what);

// dst = src converted to dst's dtype (same numel); a plain copy when the dtypes match.
void convert_into(const Tensor& dst, const Tensor& src);
// Divides every element of an f32 buffer by divisor (an avg after its sum).
void divide_(const Tensor& buffer, int divisor);

// Whether the two tensors share any bytes.
bool overlaps(const Tensor& a, const Tensor& b);

// MPI counts are ints.
int mpi_count(int64_t elements, std::string_view what);

}  // namespace meshtrain
