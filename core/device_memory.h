// Raw allocation and copies on any device. CUDA calls compile only where the toolkit was found;
// elsewhere a CUDA device raises NotSupported.
#pragma once

#include <cstddef>

#include "core/device.h"

namespace meshtrain {

void* device_alloc(Device device, size_t bytes);
// bytes: as passed to device_alloc.
void device_free(Device device, void* ptr, size_t bytes);
void device_memset_zero(Device device, void* ptr, size_t bytes);
// Copies between any two devices (host<->device, device<->device, host<->host).
void device_memcpy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes);
// Number of CUDA devices visible; 0 without a GPU or without CUDA in this build.
int cuda_device_count();
// Blocks the host until all work on the calling thread's CUDA stream is done (no-op on CPU).
void device_synchronize(Device device);

}  // namespace meshtrain
