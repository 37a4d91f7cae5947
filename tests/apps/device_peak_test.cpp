// MFU's denominator: the published dense peaks, found by the names CUDA reports, and the ratio.
#include "meshtrain/train/device_peak.h"

#include <gtest/gtest.h>

namespace meshtrain {
namespace {

TEST(DevicePeak, PublishedFiguresByTheNameCudaReports) {
  EXPECT_EQ(published_dense_peak_flops("NVIDIA H100 80GB HBM3", DType::bf16), 989.4e12);
  EXPECT_EQ(published_dense_peak_flops("NVIDIA H100 80GB HBM3", DType::f32), 66.9e12);
  EXPECT_EQ(published_dense_peak_flops("NVIDIA H200", DType::bf16), 989.4e12);
  EXPECT_EQ(published_dense_peak_flops("NVIDIA H100 PCIe", DType::bf16), 756.0e12);
  EXPECT_EQ(published_dense_peak_flops("NVIDIA H100 NVL", DType::bf16), 835.0e12);
  EXPECT_EQ(published_dense_peak_flops("NVIDIA A100-SXM4-80GB", DType::bf16), 312.0e12);
  EXPECT_EQ(published_dense_peak_flops("NVIDIA A100 80GB PCIe", DType::f32), 19.5e12);
  // Unlisted devices and dtypes have none: no MFU is reported rather than a wrong one.
  EXPECT_EQ(published_dense_peak_flops("NVIDIA GeForce RTX 4090", DType::bf16), 0.0);
  EXPECT_EQ(published_dense_peak_flops("", DType::bf16), 0.0);
  EXPECT_EQ(published_dense_peak_flops("NVIDIA H100 80GB HBM3", DType::i32), 0.0);
}

TEST(DevicePeak, UtilisationIsTheModelFlopsOverTheDevicesPeak) {
  EXPECT_DOUBLE_EQ(model_flop_utilisation(494.7e12, 989.4e12, 1), 0.5);
  EXPECT_DOUBLE_EQ(model_flop_utilisation(989.4e12, 989.4e12, 4), 0.25);
  EXPECT_EQ(model_flop_utilisation(1e12, 0.0, 1), 0.0);
  EXPECT_EQ(model_flop_utilisation(1e12, 989.4e12, 0), 0.0);
}

}  // namespace
}  // namespace meshtrain
