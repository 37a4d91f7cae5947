#include "meshtrain/core/comm/mpi/mpi_staging.h"

#include <climits>

#include "meshtrain/core/bf16.h"
#include "meshtrain/core/error.h"

namespace meshtrain {

MPI_Datatype mpi_datatype(DType dtype) {
  switch (dtype) {
    case DType::f32: return MPI_FLOAT;
    case DType::bf16: return MPI_UINT16_T;  // moved as bits, never reduced as bf16
    case DType::i32: return MPI_INT32_T;
  }
  throw InvalidArgument("mpi backend: unknown dtype");
}

MPI_Op mpi_reduce_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return MPI_SUM;
    case ReduceOp::max: return MPI_MAX;
  }
  throw InvalidArgument("mpi backend: unknown reduce op");
}

DType reduce_dtype(DType dtype) { return dtype == DType::bf16 ? DType::f32 : dtype; }

void check_reduction(DType dtype, ReduceOp op, std::string_view what) {
  MT_CHECK(!(dtype == DType::i32 && op == ReduceOp::avg), what,
           ": avg is not defined for i32 (use sum or max)");
}

void convert_into(const Tensor& dst, const Tensor& src) {
  MT_ASSERT_EQ(dst.numel(), src.numel(), "convert_into: element counts");
  const int64_t n = src.numel();
  if (dst.dtype() == src.dtype()) {
    dst.reshape({n}).copy_from(src.reshape({n}));
  } else if (dst.dtype() == DType::f32 && src.dtype() == DType::bf16) {
    float* d = dst.data<float>();
    const BF16* s = src.data<BF16>();
    for (int64_t i = 0; i < n; ++i) d[i] = to_f32(s[i]);
  } else if (dst.dtype() == DType::bf16 && src.dtype() == DType::f32) {
    BF16* d = dst.data<BF16>();
    const float* s = src.data<float>();
    for (int64_t i = 0; i < n; ++i) d[i] = to_bf16(s[i]);
  } else {
    throw InvalidArgument(detail::concat("convert_into: no conversion from ", src.describe(),
                                         " to ", dst.describe()));
  }
}

void divide_(const Tensor& buffer, int divisor) {
  float* d = buffer.data<float>();
  const float f = static_cast<float>(divisor);
  for (int64_t i = 0; i < buffer.numel(); ++i) d[i] /= f;
}

bool overlaps(const Tensor& a, const Tensor& b) {
  if (a.storage() != b.storage() || a.nbytes() == 0 || b.nbytes() == 0) return false;
  const char* a0 = static_cast<const char*>(a.raw_data());
  const char* b0 = static_cast<const char*>(b.raw_data());
  return a0 < b0 + b.nbytes() && b0 < a0 + a.nbytes();
}

int mpi_count(int64_t elements, std::string_view what) {
  MT_CHECK(elements <= static_cast<int64_t>(INT_MAX), what,
           ": the mpi backend moves at most INT_MAX elements per rank and op, got ", elements);
  return static_cast<int>(elements);
}

}  // namespace meshtrain
