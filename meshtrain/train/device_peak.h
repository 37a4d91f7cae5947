// The dense peak FLOP/s that model FLOP utilisation (MFU) is taken against: the figures NVIDIA
// publishes for its data-centre GPUs, per GPU and without structured sparsity, looked up by the
// name CUDA reports for the device. bf16 runs on tensor cores with fp32 accumulation; f32 is the
// plain fp32 rate, since meshtrain's f32 GEMMs do not use TF32.
#pragma once

#include <string_view>

#include "meshtrain/core/dtype.h"

namespace meshtrain {

// 0 for a GPU or dtype without a published figure here (MFU is then not reported).
double published_dense_peak_flops(std::string_view gpu_name, DType dtype);

// Model FLOP utilisation: the model FLOPs a step did per second over the peak of the devices
// that ran it (0 when the peak is unknown).
inline double model_flop_utilisation(double model_flops_per_s, double peak_flops_per_device,
                                     int devices) {
  return peak_flops_per_device > 0 && devices > 0
             ? model_flops_per_s / (peak_flops_per_device * devices)
             : 0.0;
}

}  // namespace meshtrain
