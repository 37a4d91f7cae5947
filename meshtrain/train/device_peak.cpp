#include "meshtrain/train/device_peak.h"

namespace meshtrain {

namespace {
struct PublishedPeak {
  std::string_view name_part;  // a part of the CUDA device name; the first match counts
  double bf16, f32;            // FLOP/s
};

// H200 SXM and H100 SXM share the compute figures; the PCIe and NVL H100s are clocked lower. A100 SXM and
// PCIe share theirs.
constexpr PublishedPeak kPeaks[] = {
    {"H200", 989.4e12, 66.9e12},
    {"H100 PCIe", 756.0e12, 51.2e12},
    {"H100 NVL", 835.0e12, 60.0e12},
    {"H100", 989.4e12, 66.9e12},
    {"A100", 312.0e12, 19.5e12},
};
}  // namespace

double published_dense_peak_flops(std::string_view gpu_name, DType dtype) {
  for (const PublishedPeak& peak : kPeaks)
    if (gpu_name.find(peak.name_part) != std::string_view::npos) {
      if (dtype == DType::bf16) return peak.bf16;
      if (dtype == DType::f32) return peak.f32;
      return 0.0;
    }
  return 0.0;
}

}  // namespace meshtrain
