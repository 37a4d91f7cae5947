// Helpers for the CUDA kernel tests: the same random inputs on the host (f32, for the CPU
// reference) and on the GPU (f32 or bf16), and element-wise comparison with stated tolerances.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "meshtrain/core/bf16.h"
#include "meshtrain/core/device_memory.h"
#include "meshtrain/core/tensor.h"

// GPU tests run where a CUDA device is visible and skip elsewhere.
#define MT_REQUIRE_GPU()                                                 \
  do {                                                                   \
    if (::meshtrain::cuda_device_count() == 0) GTEST_SKIP() << "no GPU"; \
  } while (0)

namespace meshtrain::test {

inline Device gpu() { return Device::cuda(0); }

// One tensor for both sides: `cpu` holds f32 values that are exactly representable in the GPU
// dtype (bf16 inputs are rounded first), so that both kernels see the same numbers.
struct Operand {
  Tensor cpu;
  Tensor gpu;
};

inline Operand operand_from(const std::vector<float>& values, const Shape& shape, DType dtype) {
  if (dtype == DType::f32) {
    Tensor host = Tensor::from_vector(values, shape);
    return {host, host.to(gpu())};
  }
  Tensor low = Tensor::empty(shape, DType::bf16);
  std::vector<float> rounded(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    low.data<BF16>()[i] = to_bf16(values[i]);
    rounded[i] = to_f32(low.data<BF16>()[i]);
  }
  return {Tensor::from_vector(rounded, shape), low.to(gpu())};
}

// Uniform values in [lo, hi), reproducible from the seed.
inline Operand random_operand(const Shape& shape, DType dtype, uint32_t seed, float lo = -1.0f,
                              float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> values(static_cast<size_t>(shape_numel(shape)));
  for (float& v : values) v = dist(gen);
  return operand_from(values, shape, dtype);
}

inline Operand zeros_operand(const Shape& shape, DType dtype) {
  return {Tensor::zeros(shape), Tensor::zeros(shape, dtype, gpu())};
}

// The same host tensor (f32 or i32) on the GPU, unchanged.
inline Operand same_on_both(const Tensor& host) { return {host, host.to(gpu())}; }

inline double max_abs(const Tensor& t) {
  double m = 0.0;
  for (float v : t.to_vector()) m = std::max(m, std::fabs(static_cast<double>(v)));
  return m;
}

// Names dtype-parameterised cases "f32" / "bf16" in test output.
inline std::string dtype_case_name(const ::testing::TestParamInfo<DType>& info) {
  return std::string(dtype_name(info.param));
}

struct Tolerance {
  double rtol;
  double atol;
};

// Every element: |actual - expected| <= atol + rtol * |expected|. Reports how many elements fail
// and the worst one.
inline void expect_close(const Tensor& actual, const Tensor& expected, Tolerance tol,
                         const std::string& what) {
  const std::vector<float> got = actual.to_vector(), want = expected.to_vector();
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t failures = 0, worst = 0;
  double worst_excess = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
    const double allowed = tol.atol + tol.rtol * std::fabs(static_cast<double>(want[i]));
    if (!(err <= allowed)) {  // also catches NaN
      ++failures;
      if (!(err - allowed <= worst_excess)) {
        worst_excess = err - allowed;
        worst = i;
      }
    }
  }
  EXPECT_EQ(failures, 0u) << what << ": " << failures << " of " << got.size()
                          << " elements out of tolerance (rtol " << tol.rtol << ", atol "
                          << tol.atol << "); worst at " << worst << ": gpu " << got[worst]
                          << " vs cpu " << want[worst];
}

}  // namespace meshtrain::test
