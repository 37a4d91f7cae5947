// Error checks and type mappings shared by the nccl backend's files.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <string>
#include <string_view>

#include "meshtrain/core/comm/types.h"
#include "meshtrain/core/dtype.h"

namespace meshtrain::nccl {

// NCCL's name for the result plus its last error message, when it has one.
std::string error_text(ncclResult_t result);
// Throws CommError naming what failed. ncclInProgress passes: a non-blocking communicator is
// still working in the background, and the caller polls it.
void check_nccl(ncclResult_t result, std::string_view what);
void check_cuda(cudaError_t status, std::string_view what);

ncclDataType_t to_nccl(DType dtype);
ncclRedOp_t to_nccl(ReduceOp op);

}  // namespace meshtrain::nccl
