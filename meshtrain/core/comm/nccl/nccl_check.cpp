#include "meshtrain/core/comm/nccl/nccl_check.h"

#include "meshtrain/core/error.h"

namespace meshtrain::nccl {

std::string error_text(ncclResult_t result) {
  std::string text = ncclGetErrorString(result);
  const char* last = ncclGetLastError(nullptr);
  if (last && *last) text += detail::concat(" (", last, ")");
  return text;
}

void check_nccl(ncclResult_t result, std::string_view what) {
  if (result != ncclSuccess && result != ncclInProgress)
    throw CommError(detail::concat(what, " failed: ", error_text(result)));
}

void check_cuda(cudaError_t status, std::string_view what) {
  if (status != cudaSuccess)
    throw CommError(detail::concat(what, " failed: ", cudaGetErrorString(status)));
}

ncclDataType_t to_nccl(DType dtype) {
  switch (dtype) {
    case DType::f32: return ncclFloat32;
    case DType::bf16: return ncclBfloat16;
    case DType::i32: return ncclInt32;
  }
  throw InvalidArgument(
      detail::concat("the nccl backend has no type for dtype ", static_cast<int>(dtype)));
}

ncclRedOp_t to_nccl(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return ncclSum;
    case ReduceOp::avg: return ncclAvg;
    case ReduceOp::max: return ncclMax;
  }
  throw InvalidArgument(
      detail::concat("the nccl backend has no reduction for op ", static_cast<int>(op)));
}

}  // namespace meshtrain::nccl
